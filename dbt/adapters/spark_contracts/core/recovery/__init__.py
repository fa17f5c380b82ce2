"""Runs that survive a crash or a concurrent run: the durable intent, the pending table's protocol,
the model's lease, the rebuild swapped in by two renames."""
