"""OTLP in and out: the wire formats, OTLP files read as run files, the receiver and sending.

`wire/` translates the OTLP encodings to the SDK's objects (a leaf); `files/` reads OTLP files
as run files; `receive/` is `evaltrace collect` (an OTLP receiver writing run files through the
recorder's exporters); `send/` sends stored spans (`replay`) and score results back out.
"""
