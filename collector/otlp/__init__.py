"""OTLP wire formats <-> the OTel SDK's objects: a leaf room, importing only the OTel packages.

`decode.py` turns export requests (protobuf messages) into the SDK spans and log records the
store's encoders take, every field kept and invalid items counted; `jsonformat.py` parses the
OTLP/JSON encoding into the same protobuf messages. The receiver (`collector/receive`), the file
reader (`collector/store/otlp_*.py`) and replay (`collector/send`) build on them.
"""
