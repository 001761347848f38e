"""Rule scorers over batches of the traces table: verdicts for whole batches, records only for failures.

The per-trace `Scorer.score` of every scorer stays the reference (and the only path of plugin
scorers). A built-in rule scorer with a columnar form (`forms.py`) decides from the traces table's
columns whether an entry passes; when it surely does, its `Score` is built from those columns
alone, exactly as the reference would build it. Everything else (a failure, an error, anything the
columnar form is not sure of) goes to the reference, which builds the reason and details. So the
outputs are identical entry for entry, and the engine may take the columnar path whenever it has
the table (`scope.py`).
"""
