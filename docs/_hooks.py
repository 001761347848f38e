"""MkDocs hook: the project's own documents outside docs/ become pages of the site.

SECURITY.md, ARCHITECTURE.md and benchmarks/RESULTS.md live at their places in the repository,
where GitHub shows them; the docs pages link to them as `../SECURITY.md` so the links work there.
On the site those files are added as pages at the same relative place and the `../` links are
pointed at them, so `mkdocs build --strict` checks them like any other link. A relative link inside
those files to something the site does not hold (a source file) is kept as its text and path.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
PROJECT_FILES = ("SECURITY.md", "ARCHITECTURE.md", "benchmarks/RESULTS.md", "samples/scorers.py")
"""Repository files the docs link to (as ../PATH), published with the site."""
_UP_LINK = re.compile(r"\]\(\.\./(" + "|".join(re.escape(p) for p in PROJECT_FILES) + r")([#)])")
_RELATIVE_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\((?![a-z][a-z0-9+.-]*:|#|/)([^)\s]+)\)")


def on_files(files: Files, config: Any, **_: Any) -> Files:
    """Add the project files to the site, each at its path in the repository."""
    for path in PROJECT_FILES:
        files.append(File.generated(config, path, abs_src_path=str(ROOT / path)))
    return files


def on_page_markdown(markdown: str, page: Any, files: Files, **_: Any) -> str:
    """Point the docs' `../PATH` links at the published copies; unhook project files' links to sources."""
    if page.file.src_uri in PROJECT_FILES:
        here = posixpath.dirname(page.file.src_uri)

        def keep_if_published(link: re.Match[str]) -> str:
            target = posixpath.normpath(posixpath.join(here, link.group(2).partition("#")[0]))
            return link.group(0) if files.get_file_from_path(target) else f"{link.group(1)} (`{link.group(2)}`)"

        return _RELATIVE_LINK.sub(keep_if_published, markdown)
    return _UP_LINK.sub(r"](\1\2", markdown)
