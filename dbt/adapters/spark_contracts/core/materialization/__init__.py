"""One model build, decided before its first statement: the run plan, the write path, the typed
load, microbatch windows, snapshots, the creating run, `dbt clone`, Python models."""
