"""Results: scores once computed, and where users look at them.

`report/` (the result records, the JSON report and the other formats), `store/` (the score
store: scoring runs as tables), `compare/` (comparisons and history across runs) and `review/`
(the browser app where people label entries and check judges).
"""
