"""Schema evolution: what each table format can change in place (the capability table), each
change's class and the model's change policy, the planned operations and their SQL, the row-
keeping rewrite and `on_*_change: ignore`'s fitted schema."""
