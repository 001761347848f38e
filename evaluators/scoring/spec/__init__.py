"""The spec file: its model, loading and validation against the shipped JSON Schema, and its errors."""
