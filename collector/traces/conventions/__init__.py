"""One module per span convention, and the framework envelopes they share.

Each convention gives an `extract(span)` that reads what one span says into a `NormalizedSpan`,
or None when the span is not written in that convention.
"""
