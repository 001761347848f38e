"""Running an agent over a spec's cases and recording its spans, and the pytest plugin's parts."""
