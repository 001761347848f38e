"""The HTML report's rebuilt-trace trees and inert text, for other pages that show traces (`evaltrace review`).

One implementation: the trees, the escaping and the style sheet are the report's own (`_html_trace.py`,
`_html_page.py`); this module only makes them public.
"""

from __future__ import annotations

from evaltrace.evaluators.results.report._html_page import STYLE, text
from evaltrace.evaluators.results.report._html_trace import find_traces, trace_tree

__all__ = ["STYLE", "find_traces", "text", "trace_tree"]
