"""A scripted LangChain chat model that can bind tools, and tests of the script itself.

LangChain's bundled fakes (``GenericFakeChatModel``, ``FakeMessagesListChatModel``) raise
``NotImplementedError`` from ``bind_tools``, which ``create_agent`` and structured output need.
``ScriptedChatModel`` plays a list of steps, each an ``AIMessage``, an exception to raise, or a
callable that sees the messages sent so far and returns either. Other test modules import it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

Step = AIMessage | Exception | Callable[[list[BaseMessage]], "AIMessage | Exception"]
_ids = itertools.count(1)


def call(name: str, **args: Any) -> ToolCall:
    """A tool call as a model would emit it."""
    return ToolCall(name=name, args=args, id=f"call_{next(_ids)}", type="tool_call")


def calls(*tool_calls: ToolCall) -> AIMessage:
    """An assistant message that makes ``tool_calls``."""
    return AIMessage(content="", tool_calls=list(tool_calls))


def final(*rows: tuple[str | None, Any], answer: str = "done") -> AIMessage:
    """An assistant message that calls ``FinalAnswer`` citing ``rows`` as (table, id)."""
    cited = [
        {"id": row_id} if table is None else {"table": table, "id": row_id}
        for table, row_id in rows
    ]
    return calls(call("FinalAnswer", answer=answer, rows=cited))


class ScriptedChatModel(BaseChatModel):
    """Plays ``script`` one step per call; records the messages and the tools it was given."""

    script: list[Any]
    requests: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[list[str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        self.bound_tools.append([convert_to_openai_tool(t)["function"]["name"] for t in tools])
        return self.bind(**kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.requests.append(list(messages))
        if not self.script:
            raise AssertionError("the model was called more often than scripted")
        step = self.script.pop(0)
        if callable(step) and not isinstance(step, BaseMessage | Exception):
            step = step(list(messages))
        if isinstance(step, Exception):
            raise step
        return ChatResult(generations=[ChatGeneration(message=step)])


class TestScriptedChatModel:
    def test_plays_steps_in_order(self) -> None:
        """Each call returns the next scripted message."""
        model = ScriptedChatModel(script=[AIMessage("one"), AIMessage("two")])
        assert model.invoke("hi").content == "one"
        assert model.invoke("hi").content == "two"

    def test_raises_scripted_exceptions(self) -> None:
        """An exception in the script is raised by the call that reaches it."""
        model = ScriptedChatModel(script=[RuntimeError("boom")])
        with pytest.raises(RuntimeError, match="boom"):
            model.invoke("hi")

    def test_callable_steps_see_the_messages(self) -> None:
        """A callable step receives the messages sent and returns the reply."""
        model = ScriptedChatModel(script=[lambda msgs: AIMessage(str(len(msgs)))])
        assert model.invoke([HumanMessage("a"), HumanMessage("b")]).content == "2"

    def test_fails_when_called_too_often(self) -> None:
        """Calling past the end of the script is a test failure, not a silent repeat."""
        model = ScriptedChatModel(script=[])
        with pytest.raises(AssertionError):
            model.invoke("hi")

    def test_binds_tools_and_records_their_names(self) -> None:
        """bind_tools records tool names and still answers from the script."""
        model = ScriptedChatModel(script=[calls(call("lookup", q="x"))])

        def lookup(q: str) -> str:
            """Look something up."""
            return q

        reply = model.bind_tools([lookup]).invoke("hi")
        assert model.bound_tools == [["lookup"]]
        assert reply.tool_calls[0]["name"] == "lookup"
