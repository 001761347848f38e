"""Scorers: the interface, the registry by name, plugins, and one module per built-in family."""
