"""Store: the run files on disk.

Their schema and Arrow layout, reading them back (deduplicated, grouped by trace, sharded),
compaction, run summaries and the temporary files of live writers.
"""
