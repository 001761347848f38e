"""The `evaltrace` command line."""
