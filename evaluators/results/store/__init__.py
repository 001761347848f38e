"""The score store: every scoring run's scores and its summary row, as append-only Parquet tables."""
