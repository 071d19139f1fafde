"""Settings: the values and their rules, the files, the layered store."""
