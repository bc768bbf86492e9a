"""Properties of tool-input coercion and of the tools' never-raise contract."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence import MemoryStore, create_persistence_agent, create_read_only_facade
from rag_agent import Envelope, RAGAgent, RAGSettings, build_tools
from rag_agent.tools import ToolInputError, coerce_tool_input
from rag_agent.untrusted import unwrap_boundary

_KEYS = st.text(
    st.characters(categories=["L", "N"], include_characters="_"), min_size=1, max_size=8
)
_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
_JSON = st.recursive(
    _SCALARS | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)
# Arguments as a caller would send them: never a lone wrapper key (that one is unwrapped).
_ARGS = st.dictionaries(_KEYS, _JSON, max_size=4).filter(
    lambda d: not (len(d) == 1 and next(iter(d)) in ("input", "query"))
)
_ANY_INPUT = (
    _JSON
    | st.text(max_size=200)
    | _ARGS.map(json.dumps)
    | _ARGS.map(repr)
    | _ARGS.map(lambda d: {"input": d})
    | _ARGS.map(lambda d: {"query": json.dumps(d)})
)


def _agent() -> RAGAgent:
    store = MemoryStore()
    create_persistence_agent(kind="memory", store=store).batch(
        "leads", [{"id": 1, "email": "ana@acme.example", "company_name": "Acme Inc."}]
    )
    return RAGAgent(create_read_only_facade(kind="memory", store=store), settings=RAGSettings())


TOOLS = {tool.name: tool for tool in build_tools(_agent(), content="full")}


class TestCoercionProperties:
    @given(_ARGS)
    def test_json_text_round_trips(self, args: dict[str, Any]) -> None:
        """A JSON object string coerces to the object it encodes."""
        assert coerce_tool_input(json.dumps(args)) == args

    @given(_ARGS)
    def test_python_literal_text_round_trips(self, args: dict[str, Any]) -> None:
        """repr() of a dict of literals coerces back to the dict."""
        assert coerce_tool_input(repr(args)) == args

    @given(_ARGS, st.sampled_from(["input", "query"]), st.booleans())
    def test_wrappers_are_transparent(self, args: dict[str, Any], key: str, as_text: bool) -> None:
        """{"input": x} and {"query": x} coerce like x, whether x is a dict or its JSON."""
        inner: Any = json.dumps(args) if as_text else args
        assert coerce_tool_input({key: inner}) == coerce_tool_input(args)

    @given(st.text(max_size=200).filter(lambda t: not t.strip().startswith("{")))
    def test_plain_text_becomes_the_text_field(self, text: str) -> None:
        """Text that is not an object is the free-text argument of text tools."""
        assert coerce_tool_input(text, text_field="query") == {"query": text}

    @given(_ANY_INPUT)
    def test_result_is_a_dict_or_a_tool_input_error(self, raw: Any) -> None:
        """Coercion either yields a dict with string keys or raises ToolInputError only."""
        try:
            result = coerce_tool_input(raw, text_field="query")
        except ToolInputError:
            return
        assert isinstance(result, dict) and all(isinstance(k, str) for k in result)


class TestToolsNeverRaise:
    @pytest.mark.parametrize("name", ["query_leads", "query_table", "rag_agent"])
    @given(raw=_ANY_INPUT)
    def test_any_input_gives_a_valid_envelope(self, name: str, raw: Any) -> None:
        """Whatever the input, the data tools answer with an envelope (JSON and artifact)."""
        message = TOOLS[name].invoke(
            {"name": name, "args": raw, "id": "call_1", "type": "tool_call"}
            if isinstance(raw, dict)
            else raw
        )
        content = message.content if hasattr(message, "content") else message
        envelope = Envelope.model_validate(json.loads(unwrap_boundary(content)))
        assert envelope.metadata.total_count >= len(envelope.records)
        if envelope.records:
            assert envelope.metadata.error is None

    @given(raw=_ANY_INPUT)
    def test_deliver_data_is_always_disabled(self, raw: Any) -> None:
        """deliver_data answers DISABLED for any input."""
        assert TOOLS["deliver_data"].invoke(raw) == {"status": "DISABLED"}
