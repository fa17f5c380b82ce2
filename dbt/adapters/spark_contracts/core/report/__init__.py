"""What a run tells: the console lines, the dry run's plan file, the run history, the docs
catalog's rows."""
