"""Sending stored runs back out over OTLP.

Spans and log records are rebuilt as OTel SDK objects (by `wire/decode.py`'s builders) and handed to the SDK's own
OTLP exporters (`exporters.py`), by `replay.py` (`evaltrace replay`) and by the evaluation results
sink of `score --send-results` (`results.py`).
"""
