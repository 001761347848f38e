"""Code blocks of the user documentation, for the tests that run them exactly as a user would copy them.

The documentation is README.md and the pages of the docs site (docs/*.md); every helper here reads
all of them, so a block is found wherever it lives. A recipe is marked by `<!-- recipe: NAME -->`
right before its ```python block (the user's app.py); the ```bash block after it holds the commands.
Other blocks are found by their first line or content, and must be unique across the documentation.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import requires
from pathlib import Path

from fake_llm import FakeLLM

BIN = Path(sys.executable).parent
"""The venv's scripts (python, opentelemetry-instrument, evaltrace), first on the user's PATH."""
REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
_RECIPE = re.compile(r"<!-- recipe: ([\w-]+) -->\n```python\n(.*?)```\n\n```bash\n(.*?)```", re.DOTALL)
_BASH = re.compile(r"```bash\n(.*?)```", re.DOTALL)
_PIP_EXTRA = re.compile(r"^pip install 'evaltrace\[([\w,-]+)\]'$")


@dataclass(frozen=True)
class Recipe:
    """One recipe: the app the user saves as app.py and the shell lines they run."""

    name: str
    app: str
    commands: list[str]

    def extras(self) -> list[str]:
        """The evaltrace extras its `pip install` line names."""
        found = [m.group(1) for line in self.commands if (m := _PIP_EXTRA.match(line))]
        return [extra for group in found for extra in group.split(",")]

    def run_lines(self) -> list[str]:
        """The lines to run once the extras are installed (the test environment has every extra)."""
        return [line for line in self.commands if not line.startswith("pip install")]


def doc_pages() -> dict[Path, str]:
    """README.md and every page of the docs site, by path, as text."""
    return {path: path.read_text(encoding="utf-8") for path in [README, *sorted(DOCS.glob("*.md"))]}


def docs_text() -> str:
    """The whole user documentation as one text (README.md, then the docs pages in name order)."""
    return "\n\n".join(doc_pages().values())


def recipes() -> dict[str, Recipe]:
    """Every recipe of the documentation by name."""
    return {
        name: Recipe(name, app, [line for line in commands.splitlines() if line.strip()])
        for name, app, commands in _RECIPE.findall(docs_text())
    }


def bash_block(first_line_prefix: str) -> str:
    """The one ```bash block of the documentation whose first line starts with `first_line_prefix`."""
    found = [block for block in _BASH.findall(docs_text()) if block.startswith(first_line_prefix)]
    assert len(found) == 1, f"expected one bash block starting {first_line_prefix!r} in the docs, found {len(found)}"
    return found[0]


def sql_block(containing: str) -> str:
    """The one ```sql block of the documentation that contains `containing`."""
    found = [block for block in re.findall(r"```sql\n(.*?)```", docs_text(), re.DOTALL) if containing in block]
    assert len(found) == 1, f"expected one sql block containing {containing!r} in the docs, found {len(found)}"
    return found[0]


def extra_requirements(extra: str) -> list[str]:
    """The requirements evaltrace's installed metadata lists for `extra` (empty for an unknown extra)."""
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    return [req.split(";")[0].strip() for req in requires("evaltrace") or [] if marker.search(req)]


def user_env(llm: FakeLLM, **extra: str) -> dict[str, str]:
    """A user's shell: the suite's environment without OTel/evaltrace settings, the venv first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_", "OPENAI_"))}
    closed = "http://127.0.0.1:9"  # nothing listens: a request to another host fails here
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_BASE=llm.base_url,  # the older name, which LlamaIndex and LiteLLM read
        OPENAI_API_KEY="sk-recipe-test",
        HTTP_PROXY=closed,
        HTTPS_PROXY=closed,
        NO_PROXY="127.0.0.1,localhost",
    )
    env.update(extra)
    return env


def run_lines(lines: list[str], cwd: Path, env: dict[str, str]) -> list[subprocess.CompletedProcess[str]]:
    """Run each line (or whole block) in bash, in `cwd`; each must succeed without a traceback."""
    done = []
    for line in lines:
        proc = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, f"{line!r} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr
        done.append(proc)
    return done
