"""The converter's version, in a module of its own.

The traces cache keys its tables by it, and a warm re-scoring reads those tables without importing
the converter (`rebuild.py` and its rules).
"""

from __future__ import annotations

from typing import Final

CONVERTER_VERSION: Final = "3"
"""The version of what the converter makes of spans. Bump it in any change that alters the
`Trace` records rebuilt from the same spans (a new rule, a fixed field, a new convention): the
traces cache (`cache.py`) keys its tables by it, so a bump makes every cached table stale. (As a
safety net the cache also keys by the converter's source files, which catches an edited checkout,
but an installed release is only told apart by this constant and the package version.)"""
