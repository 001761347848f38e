"""Commands (being built)."""
