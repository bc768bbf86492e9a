"""The public surface of ``rag_agent`` is deliberate."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import rag_agent


class TestExports:
    """``rag_agent.__all__`` lists exactly the public names, each with a docstring."""

    def test_design_names_exported(self) -> None:
        """The names the design promises are importable from the package."""
        for name in (
            "create_rag_agent",
            "RAGAgent",
            "Envelope",
            "parse_filters_from_text",
            "row_hash",
        ):
            assert name in rag_agent.__all__

    def test_all_matches_public_attributes(self) -> None:
        """Every name in __all__ exists, and every public non-module attribute is in __all__."""
        import types

        public = {
            name
            for name, value in vars(rag_agent).items()
            if not name.startswith("_") and not isinstance(value, types.ModuleType)
        }
        assert public == set(rag_agent.__all__)

    def test_docstrings(self) -> None:
        """Every exported class and function has a docstring."""
        for name in rag_agent.__all__:
            value = getattr(rag_agent, name)
            if isinstance(value, type) or inspect.isfunction(value):
                assert value.__doc__, name


def _import_graph() -> dict[str, set[str]]:
    """Each ``rag_agent`` module and the ``rag_agent`` modules it imports, anywhere in its code."""
    root = Path(rag_agent.__file__).parent
    modules: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
        # A submodule's own package runs first anyway: that edge is not a cycle in the code.
        graph[name] = {
            t for t in targets if t in modules and t != name and not name.startswith(t + ".")
        }
    return graph


class TestModuleGraph:
    """The package's modules import each other without a cycle."""

    def test_no_import_cycle(self) -> None:
        """No module reaches itself through its imports (function-level imports included)."""
        graph = _import_graph()
        assert {"rag_agent.agent", "rag_agent.hooks", "rag_agent.fallback.runner"} <= set(graph)
        done: set[str] = set()

        def visit(module: str, path: tuple[str, ...]) -> None:
            assert module not in path, "import cycle: " + " -> ".join((*path, module))
            if module in done:
                return
            for imported in sorted(graph[module]):
                visit(imported, (*path, module))
            done.add(module)

        for module in sorted(graph):
            visit(module, ())
