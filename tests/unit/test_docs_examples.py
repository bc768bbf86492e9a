"""The documentation's code examples run, its links resolve, and the Quickstart stays two commands.

Every fenced ```python block in README.md and docs/**/*.md is executed, in order, one namespace
per file (so a later block may use what an earlier one defined). A block that must not run (it
needs a real server, an API key, or shows a failure on purpose) is preceded by the line
``<!-- no-test -->``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NO_TEST = "<!-- no-test -->"
_FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
_LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it starts, its language, its text, whether to run it."""

    path: Path
    line: int
    language: str
    code: str
    skip: bool


def doc_files() -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, start = match["fence"], i
        previous = next((ln.strip() for ln in reversed(lines[:start]) if ln.strip()), "")
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        found.append(
            Block(path, start + 1, match["info"].lower(), "\n".join(body), previous == NO_TEST)
        )
        i += 1
    return found


def _runnable(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.language in {"python", "py"} and not b.skip]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.fixture
def _no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Examples run without LLM keys or backend settings from the developer's shell."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RAG_POSTGRES_DSN", "SUPABASE_URL",
                 "SUPABASE_KEY", "RAG_DEBUG"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


class TestCodeExamples:
    """Each documentation file's Python examples run top to bottom without an error."""

    @pytest.mark.usefixtures("_no_secrets")
    @pytest.mark.parametrize("path", doc_files(), ids=_rel)
    def test_examples_run(self, path: Path) -> None:
        """Every runnable block of the file executes in one shared namespace."""
        namespace: dict[str, object] = {"__name__": f"docs_example_{path.stem}"}
        for block in _runnable(path):
            code = compile(block.code, f"{_rel(path)}:{block.line}", "exec")
            try:
                exec(code, namespace)  # the project's own documentation
            except Exception as exc:  # pragma: no cover - reports which block failed
                pytest.fail(f"{_rel(path)} block at line {block.line} failed: {exc!r}")


class TestBlockParsing:
    """The block finder honours fences, languages and the no-test marker."""

    def test_marker_and_languages(self, tmp_path: Path) -> None:
        """Only python blocks without the marker run; the marker skips just the next block."""
        doc = tmp_path / "x.md"
        doc.write_text(
            "text\n```python\nA = 1\n```\n<!-- no-test -->\n\n```python\nraise SystemExit\n```\n"
            "```bash\nmake demo\n```\n````python\nB = '```'\n````\n",
            encoding="utf-8",
        )
        found = blocks(doc)
        assert [(b.language, b.skip) for b in found] == [
            ("python", False),
            ("python", True),
            ("bash", False),
            ("python", False),
        ]
        assert [b.code for b in _runnable(doc)] == ["A = 1", "B = '```'"]
        assert found[0].line == 2


class TestReadme:
    """The README keeps its promises to a new user."""

    def test_quickstart_is_two_commands(self) -> None:
        """The Quickstart's only code block holds exactly `make demo` and `make test`."""
        text = (ROOT / "README.md").read_text(encoding="utf-8")
        section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
        (block,) = blocks_in_text(section)
        commands = [ln.split("#", 1)[0].strip() for ln in block.splitlines()]
        assert [c for c in commands if c] == ["make demo", "make test"]

    @pytest.mark.parametrize(
        "heading",
        ["## Quickstart", "## Python usage", "## LangChain usage", "## Backends",
         "## Configuration", "## Security", "## Development"],
    )  # fmt: skip
    def test_sections(self, heading: str) -> None:
        """Each section a new user looks for is there."""
        text = (ROOT / "README.md").read_text(encoding="utf-8")
        assert re.search(rf"^{re.escape(heading)}\b", text, re.MULTILINE)


def blocks_in_text(text: str) -> list[str]:
    """The bodies of the fenced blocks in a Markdown fragment."""
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


class TestLinks:
    """Relative links in the documentation point at files that exist."""

    @pytest.mark.parametrize("path", doc_files(), ids=_rel)
    def test_relative_links_resolve(self, path: Path) -> None:
        """Every link that is not a URL or an anchor names an existing file."""
        text = path.read_text(encoding="utf-8")
        prose = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
        missing = []
        for match in _LINK.finditer(prose):
            target = match["target"].split("#", 1)[0]
            if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            if not (path.parent / target).exists():
                missing.append(match["target"])
        assert not missing, f"{_rel(path)} links to missing files: {missing}"
