r"""Text bound for a terminal: recorded content made inert, and counts with the right noun.

Recorded trace content is untrusted input, and a terminal obeys what it is sent: an OSC sequence
(`ESC ] 0 ; title BEL`) retitles the window, a CSI sequence moves the cursor or rewrites earlier
lines, a carriage return overprints a line (`PASSED\rFAILED`), and a bidi override (U+202E)
shows text in another order than it is stored. `printable` turns every such character into a
visible escape (`\x1b`, `\u202e`), so what reaches the screen is what was recorded, shown, never
run. The characters escaped are C0 controls (newline and tab only where the caller's layout
allows them), DEL, C1 controls (U+0080-U+009F: some terminals read U+009B as CSI), the bidi
embeddings, overrides, isolates and marks, and the Unicode line and paragraph separators.

A CI log obeys more than a terminal: GitHub Actions runs a line that starts (after spaces) with
`::` (`::error::`, `::add-mask::`, `::stop-commands::`) and a line holding `##[` followed by a
command name, and a newline in a value would start a line of its own (a forged `Gate PASSED`).
`inline` is the one way a recorded value is laid out in terminal text: `printable` with newlines
escaped, a leading `::` written `\x3a:` and every `##[` written `#\x23[`; `lines_text` joins laid-out
lines, each passed through `inline`, so no line can be started or turned into a command by
recorded content.

JSON output must stay exact JSON: `json.dumps` escapes C0 controls but writes C1, DEL and bidi
characters raw. `json_text` and `json_safe_bytes` write those as `\uXXXX` escapes instead, which
a JSON parser reads back as the very same characters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

_BIDI_AND_SEPARATORS = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029)
_CONTROLS = (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))
_ESCAPES = {code: (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}") for code in _CONTROLS + _BIDI_AND_SEPARATORS}
_ESCAPES.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


def _char_class(codes: tuple[int, ...]) -> str:
    return "".join(re.escape(chr(code)) for code in codes)


_UNSAFE = re.compile(f"[{_char_class(tuple(_ESCAPES))}]")
_LAYOUT = (ord("\n"), ord("\t"))
_UNSAFE_KEEP_LAYOUT = re.compile(f"[{_char_class(tuple(c for c in _ESCAPES if c not in _LAYOUT))}]")
# In `json.dumps` output every C0 control is already escaped; these are the ones it writes raw.
_JSON_RAW = re.compile(f"[{_char_class((0x7F, *range(0x80, 0xA0), *_BIDI_AND_SEPARATORS))}]")
# The same characters as UTF-8 byte sequences (a lead byte never matches a continuation byte,
# so these cannot match across two characters of valid UTF-8).
_JSON_RAW_BYTES = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]")


def printable(text: str, *, layout: bool = False) -> str:
    r"""`text` with every terminal control character shown as a visible escape (`\x1b`, `\u202e`).

    Args:
        text: anything that may hold recorded content.
        layout: keep newlines and tabs (for multi-line text the caller laid out itself); by
            default they are escaped too, so one value stays on one line.

    Returns:
        The same text when it holds nothing to escape (the common case, checked in C).
    """
    pattern = _UNSAFE_KEEP_LAYOUT if layout else _UNSAFE
    if pattern.search(text) is None:
        return text
    return pattern.sub(lambda found: _ESCAPES[ord(found.group())], text)


_COMMAND_START = re.compile(r"\A(\s*):(?=:)")
_LEGACY_COMMAND = "##["


def inline(text: object) -> str:
    r"""`text` as one inert line fragment: `printable` (newlines escaped too), and no CI log command.

    A leading `::` (after white space) becomes `\x3a:` and `##[` becomes `#\x23[`: the forms GitHub
    Actions reads as workflow commands. Use it for every recorded value laid out in terminal text.
    """
    flat = printable(str(text))
    if ":" not in flat and "#" not in flat:
        return flat
    flat = _COMMAND_START.sub(lambda found: found.group(1) + "\\x3a", flat, count=1)
    return flat.replace(_LEGACY_COMMAND, "#\\x23[")


def lines_text(lines: Iterable[str]) -> str:
    """Laid-out lines as terminal text: each through `inline`, each ended by a newline."""
    return "".join(inline(line) + "\n" for line in lines)


def json_text(value: Any, **dumps: Any) -> str:
    r"""`json.dumps(value, ensure_ascii=False, **dumps)`, with C1, DEL and bidi characters as `\uXXXX` escapes."""
    return json_safe(json.dumps(value, ensure_ascii=False, **dumps))


def json_safe(text: str) -> str:
    r"""JSON text (as `json.dumps` writes it) with the controls it leaves raw written as `\uXXXX` escapes."""
    if _JSON_RAW.search(text) is None:
        return text
    return _JSON_RAW.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def json_safe_bytes(data: bytes) -> bytes:
    """`json_safe` for UTF-8 encoded JSON (a streamed report)."""
    if _JSON_RAW_BYTES.search(data) is None:
        return data
    return _JSON_RAW_BYTES.sub(lambda found: f"\\u{ord(found.group().decode()):04x}".encode(), data)


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """`1 trace`, `2 traces`, `0 traces`; `plural_form` for nouns not made with `s` (`entry`, `entries`)."""
    noun = singular if count == 1 else (plural_form if plural_form is not None else singular + "s")
    return f"{count} {noun}"
