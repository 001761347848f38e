"""The scoring engine: match traces to cases, score samples, aggregate repeats, shard and time-limit runs."""
