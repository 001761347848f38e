"""Scoring: what a check is and how one trace is scored.

`spec/` (the spec file: cases, expectations, scorer configs), `scorers/` (the rule and judge
scorers by name, each rule scorer's columnar form beside it), `columns.py` (the traces table's
batches those forms read, and the forms by scorer class) and `judge/` (LLM judges over the
OpenAI Chat Completions API). The engine (`evaluators/engine`)
runs them over traces; `evaluators/results` holds what comes out.
"""
