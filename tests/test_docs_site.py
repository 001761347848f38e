"""The documentation site builds with `mkdocs build --strict`, and a broken link or a lost page fails it.

mkdocs runs as a real subprocess on the repository's mkdocs.yml, into a temporary folder. Its
validation is set to warn (and so, under --strict, fail) on a link to a missing page or anchor, an
absolute link, and a page left out of the navigation; the second test shows each of those fails a
copy of the site. The README is not part of the site, so its links into docs/ are checked against
the built pages here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PROJECT_FILES = ("SECURITY.md", "ARCHITECTURE.md", "benchmarks/RESULTS.md", "samples/scorers.py")
"""Files outside docs/ the site publishes (docs/_hooks.py); a copy of the site needs them."""


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(root / "mkdocs.yml")]
    return subprocess.run([*command, "--site-dir", str(site)], capture_output=True, text=True, timeout=300)


def nav_pages(nav: list[Any]) -> list[str]:
    """Every page the navigation of mkdocs.yml names, in order."""
    pages: list[str] = []
    for item in nav:
        for value in item.values() if isinstance(item, dict) else [item]:
            pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    done = build(REPO, site)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    return site


def test_every_page_in_the_navigation_is_built(site: Path) -> None:
    nav = nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    on_disk = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert sorted(p for p in nav if "/" not in p and p not in PROJECT_FILES) == on_disk
    for page in nav:
        built = site / ("index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html")
        assert built.is_file(), page
    review = (site / "review" / "index.html").read_text(encoding="utf-8")
    assert 'src="../review.png"' in review and (site / "review.png").stat().st_size > 10_000


def _copy_site(destination: Path) -> Path:
    destination.mkdir()
    shutil.copy2(REPO / "mkdocs.yml", destination / "mkdocs.yml")
    shutil.copytree(REPO / "docs", destination / "docs")
    for name in PROJECT_FILES:
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, destination / name)
    return destination


@pytest.mark.parametrize(
    ("change", "warning"),
    [
        ("[the store](reports.md#no-such-section)", "does not contain an anchor '#no-such-section'"),
        ("[gone](removed-page.md)", "contains a link 'removed-page.md', but the target is not found"),
        ("[security](../NO-SUCH-FILE.md)", "contains a link '../NO-SUCH-FILE.md'"),
    ],
)
def test_a_broken_link_fails_the_build(tmp_path: Path, change: str, warning: str) -> None:
    root = _copy_site(tmp_path / "copy")
    page = root / "docs" / "scoring.md"
    page.write_text(page.read_text(encoding="utf-8") + f"\nSee {change}.\n", encoding="utf-8")
    done = build(root, tmp_path / "site")
    assert done.returncode != 0
    assert warning in done.stderr, done.stderr


def test_a_page_left_out_of_the_navigation_fails_the_build(tmp_path: Path) -> None:
    root = _copy_site(tmp_path / "copy")
    (root / "docs" / "orphan.md").write_text("# Orphan\n", encoding="utf-8")
    done = build(root, tmp_path / "site")
    assert done.returncode != 0
    assert "orphan.md" in done.stderr, done.stderr


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readmes_links_reach_pages_and_anchors(site: Path) -> None:
    links = [link for link in _LINK.findall((REPO / "README.md").read_text(encoding="utf-8")) if "://" not in link]
    assert sum(link.startswith("docs/") for link in links) >= 15, links
    for link in links:
        path, _, anchor = link.partition("#")
        assert (REPO / path).exists(), link
        if path.startswith("docs/") and path.endswith(".md") and anchor:
            name = path.removeprefix("docs/").removesuffix(".md")
            html = (site / ("" if name == "index" else name) / "index.html").read_text(encoding="utf-8")
            assert f'id="{anchor}"' in html, link
