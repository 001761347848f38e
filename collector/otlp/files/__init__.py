"""OTLP files: JSON lines or length-prefixed protobuf, plain or gzip, read as run files.

`framing.py` tells the format by content and yields messages one at a time, `messages.py` turns
them into SDK spans and log records, `importer.py` writes those as run files batch by batch and
`import_cache.py` keeps each file's import in the cache, so a PATH argument naming an OTLP file
stands for the run files it was imported into.
"""
