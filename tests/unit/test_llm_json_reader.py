"""How a model's answer is read as text: the tolerant JSON reader and content blocks."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

from rag_agent.understanding.llm.extract import message_text, read_json_object


class TestReadJsonObject:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ('{"id": 7}', {"id": 7}),
            ('```json\n{"id": 7}\n```', {"id": 7}),
            ('```\n{"company": "Acme"}\n```', {"company": "Acme"}),
            (
                'Sure! Here it is: {"email": "a@b.example"} Hope that helps.',
                {"email": "a@b.example"},
            ),
            ('{not json} then {"id": 1}', {"id": 1}),
            ('{"outer": {"id": 2}}', {"outer": {"id": 2}}),
            ('Filters:\n```json\n{"id": 3}\n```\nor {"id": 4}', {"id": 3}),
        ],
    )
    def test_finds_the_object(self, text: str, expected: dict[str, Any]) -> None:
        """The first JSON object is found inside fences or prose."""
        assert read_json_object(text) == expected

    @pytest.mark.parametrize("text", ["", "no json here", "[1, 2]", "{'id': 1}", "{"])
    def test_none_when_there_is_no_object(self, text: str) -> None:
        """Text without a JSON object (lists, Python literals, fragments) gives None."""
        assert read_json_object(text) is None

    def test_non_text_gives_none(self) -> None:
        """A non-string input is not parsed."""
        assert read_json_object(None) is None  # type: ignore[arg-type]

    @given(st.text(max_size=300))
    def test_never_raises(self, text: str) -> None:
        """Any text yields a dict or None, never an exception."""
        assert read_json_object(text) is None or isinstance(read_json_object(text), dict)

    @given(st.dictionaries(st.text(max_size=10), st.integers() | st.text(max_size=10), max_size=4))
    def test_round_trips_an_object_in_prose(self, obj: dict[str, Any]) -> None:
        """An object embedded in prose is read back unchanged."""
        import json

        assert read_json_object(f"Answer: {json.dumps(obj)} -- end") == obj


class TestMessageText:
    def test_content_blocks_are_joined(self) -> None:
        """List content (text blocks) is read as text."""
        message = AIMessage(content=[{"type": "text", "text": "a"}, "b", {"type": "image"}])
        assert message_text(message) == "a\nb"
