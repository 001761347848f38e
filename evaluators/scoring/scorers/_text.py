"""Text matching for the answer scorers: word-boundary aliases and numbers by value.

An alias matches only as a whole word: `price` does not match `priceless` or `surprise`, and a
multi-word alias (`profit margin`) matches across any run of whitespace, case-insensitively. At
an end of the alias that is a letter or digit, the neighbouring character must not be a word
character; at an end that is a symbol (`$`, `%`), it must not be a letter, so `$` matches in
`$199` but not in `a$b`. Plurals and other inflections are not matched: list them as aliases.

Numbers are read with thousands separators (`1,234.5`) and compared by value (`18 == 18.0`); a
hyphen counts as a minus sign only where it does not join two tokens (`2024-05-01` holds 2024,
5 and 1).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable

_NUMBER = re.compile(r"(?<![\w.])(-?)(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\d])")


@functools.lru_cache(maxsize=4096)
def alias_pattern(alias: str) -> re.Pattern[str]:
    """The compiled whole-word pattern for `alias` (cached: specs reuse the same aliases)."""
    words = alias.strip().split()
    body = r"\s+".join(re.escape(w) for w in words)
    first, last = words[0][0], words[-1][-1]
    # Alphanumeric ends need a non-word neighbour; symbol ends only need a non-letter neighbour.
    left = r"(?<!\w)" if first.isalnum() else r"(?<![^\W\d_])"
    right = r"(?!\w)" if last.isalnum() else r"(?![^\W\d_])"
    return re.compile(left + body + right, re.IGNORECASE)


def mentions(text: str, aliases: Iterable[str]) -> bool:
    """Whether any non-blank alias occurs in `text` as a whole word."""
    return any(alias_pattern(a).search(text) for a in aliases if a.strip())


def numbers(text: str) -> list[float]:
    """Every number in `text`, in order."""
    found = []
    for sign, digits in _NUMBER.findall(text):
        found.append(float(sign + digits.replace(",", "")))
    return found


def parse_number(text: str) -> float | None:
    """`text` as a number when it is exactly one (currency and unit symbols around it allowed)."""
    stripped = text.strip()
    values = numbers(stripped)
    if len(values) != 1 or re.search(r"[A-Za-z]{2,}", stripped):
        return None
    return values[0]


def same_number(a: float, b: float) -> bool:
    """Equal by value, tolerating float noise."""
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def contains_number(text_numbers: Iterable[float], value: float) -> bool:
    """Whether `value` is among `text_numbers`."""
    return any(same_number(n, value) for n in text_numbers)


_STOPWORDS = frozenset(
    "the and for are but not you your with that this from have has had was were will would can could "
    "should there their they them then than its it's into about which what when where who whom how "
    "also just only very some any all each more most other such our out over under here".split()
)


def key_terms(text: str) -> list[str]:
    """Content terms of `text`: its numbers and its words of 3+ letters outside a small stopword list."""
    terms: list[str] = []
    for token in re.findall(r"\d[\d,]*(?:\.\d+)?|[^\W\d_]{3,}", text):
        if token[0].isdigit() or token.casefold() not in _STOPWORDS:
            if token.casefold() not in (t.casefold() for t in terms):
                terms.append(token)
    return terms
