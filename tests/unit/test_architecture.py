"""The layout and import order of docs/architecture.md, held by the import contracts in
pyproject.toml and by what the contracts cannot express: cycles inside one package, imports of
another package's private modules, and the shape of the two packages' folders."""

from __future__ import annotations

import ast
import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("persistence", "rag_agent")
MAX_MODULE_LINES = 700
MAX_RAG_AGENT_TOP_MODULES = 12


def _modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            yield name, path


def _imported(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, at any depth of its code (functions and TYPE_CHECKING
    blocks included), with ``from a import b`` counted as ``a.b`` where that is a module."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_the_import_contracts_hold() -> None:
    """Layers, backend independence and the forbidden internals, as `make lint` checks them."""
    with contextlib.redirect_stdout(io.StringIO()) as report:
        code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    assert code == 0, report.getvalue()


def test_no_import_cycle_between_modules() -> None:
    """No two modules import each other, directly or round a loop, whatever hides the import."""
    graph = grimp.build_graph(*PACKAGES)
    edges = {m: graph.find_modules_directly_imported_by(m) & graph.modules for m in graph.modules}
    cycles = [sorted(group) for group in _strongly_connected(edges) if len(group) > 1]
    assert cycles == []


def test_no_private_module_is_imported_from_another_package() -> None:
    names = dict(_modules())
    reached = []
    for module, path in names.items():
        for target in _imported(path):
            if target not in names:
                continue
            parent, _, leaf = target.rpartition(".")
            private = leaf.startswith("_") and not leaf.startswith("__")
            if private and module != parent and not module.startswith(parent + "."):
                reached.append(f"{module} -> {target}")
    assert reached == []


def test_the_folders_show_the_concerns() -> None:
    """At most a dozen modules at the top of rag_agent; one folder per backend beside base.py."""
    top = [p.name for p in (ROOT / "rag_agent").glob("*.py") if p.name != "__init__.py"]
    assert len(top) <= MAX_RAG_AGENT_TOP_MODULES, sorted(top)
    backends = ROOT / "persistence" / "backends"
    files = {p.name for p in backends.glob("*.py")}
    folders = {p.name for p in backends.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert files == {"__init__.py", "base.py"}
    assert folders == {"memory", "postgres", "supabase"}
    prefixed = [name for name, _ in _modules() if any(
        part.startswith(("_pg_", "_postgrest_", "_supabase_", "_memory_"))
        for part in name.split(".")
    )]  # fmt: skip
    assert prefixed == []


def _classes(source: str) -> list[str]:
    """The classes a module defines at its top level."""
    return [n.name for n in ast.parse(source).body if isinstance(n, ast.ClassDef)]


def _too_long(source: str) -> bool:
    """Over the limit, unless the module is one class: the limit is a guide for modules that
    mix concerns, not a reason to scatter one class over several files."""
    return source.count("\n") > MAX_MODULE_LINES and len(_classes(source)) != 1


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_longer_than_the_limit(package: str) -> None:
    long = {
        str(path.relative_to(ROOT)): source.count("\n")
        for name, path in _modules()
        if name.split(".")[0] == package and _too_long(source := path.read_text(encoding="utf-8"))
    }
    assert long == {}


def test_the_limit_spares_one_class_only() -> None:
    """A long module of one class passes; a long one of two classes, or of functions, fails."""
    body = "    x = 1\n" * MAX_MODULE_LINES
    assert not _too_long(f"class A:\n{body}")
    assert _too_long(f"class A:\n{body}class B:\n    pass\n")
    assert _too_long("def f() -> None:\n" + "    pass\n" * MAX_MODULE_LINES)
    assert not _too_long("class A:\n    pass\nclass B:\n    pass\n")


def _strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of the module graph."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(edges)))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in edges[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            groups.append(group)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups
