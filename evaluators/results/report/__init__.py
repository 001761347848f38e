"""The scoring report: its typed model and gate, and one writer per output format."""
