"""The public surface of ``rag_agent`` is deliberate."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import rag_agent


class TestExports:
    """``rag_agent.__all__`` lists exactly the public names, each with a docstring."""

    def test_design_names_exported(self) -> None:
        """The names the design promises are importable from the package."""
        for name in (
            "create_rag_agent",
            "RAGAgent",
            "Envelope",
            "understand",
            "row_hash",
        ):
            assert name in rag_agent.__all__

    def test_all_matches_public_attributes(self) -> None:
        """Every name in __all__ exists, and every public non-module attribute is in __all__."""
        import types

        for name in rag_agent.__all__:
            getattr(rag_agent, name)  # loaded on first use: afterwards an ordinary attribute
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


class TestLazyExports:
    """The package's names are loaded on first use, and are the objects their modules define."""

    def test_import_loads_no_langchain(self) -> None:
        """A fresh `import rag_agent, rag_agent.cli` loads neither LangChain nor the settings."""
        import subprocess
        import sys

        probe = (
            "import sys, rag_agent, rag_agent.cli; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('langchain', 'langchain_core', 'pydantic_settings', 'persistence')))"
        )
        result = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        )
        assert result.stdout.strip() == "[]"

    def test_names_are_the_modules_objects(self) -> None:
        """Each exported name is the very object of the module that defines it."""
        import importlib

        for name, module in rag_agent._EXPORTS.items():
            assert getattr(rag_agent, name) is getattr(importlib.import_module(module), name)
        assert set(rag_agent._EXPORTS) == set(rag_agent.__all__)

    def test_unknown_name(self) -> None:
        """A name the package does not define is an AttributeError, as for any module."""
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = rag_agent.no_such_name  # type: ignore[attr-defined]


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
