"""The public surface of ``rag_agent`` is deliberate."""

from __future__ import annotations

import inspect

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
