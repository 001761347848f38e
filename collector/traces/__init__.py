"""Convert: spans -> `Trace` records.

Each span is read by its convention (`conventions/`), the spans of a trace are arranged into a
tree, and records are assembled by structural rules (`_assemble.py`).
"""
