"""The `geops` command line."""
