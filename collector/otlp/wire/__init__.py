"""OTLP wire formats <-> the OTel SDK's objects: a leaf, importing only the OTel packages.

`decode.py` turns export requests (protobuf messages) into the SDK spans and log records the run
files' encoders take, every field kept and invalid items counted; `jsonformat.py` (values by
`jsonvalues.py`) turns the OTLP/JSON encoding straight into the same objects, through the same
`decode.new_*` builders, with no protobuf message in between; `limits.py` holds the SDK's span
limits on a request.
"""
