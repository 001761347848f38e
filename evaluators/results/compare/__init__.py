"""Comparing two scoring runs: per case and scorer, what regressed or was fixed, and whether it is significant."""
