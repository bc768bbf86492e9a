"""Each MCP session holds its own conversation: follow-ups over stdio with the SDK's client, and
two sessions of one server kept apart, whatever conversation id a client names."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.memory import create_connected_server_and_client_session

from persistence import MemoryStore
from rag_agent import RAGAgent, create_rag_agent
from rag_agent.mcp_server import create_mcp_server
from rag_agent.ops.sample import load_sample, sample_rows
from rag_agent.settings import RAGSettings
from tests.support.mcp import ROOT, envelope_of, server_env


def truth(company: str, status: str | None = None) -> int:
    return sum(
        1
        for r in sample_rows("leads")
        if company in (r["company_name"] or "").lower() and status in (None, r["status"])
    )


async def ask(client: ClientSession, query: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool("rag_agent", {"query": query, **arguments})
    assert result.isError is False, result
    return envelope_of(result)["metadata"]


def test_a_stdio_session_answers_follow_ups(tmp_path: Path) -> None:
    """A spawned server reads the second question against the first one of the session."""
    parameters = StdioServerParameters(
        command=sys.executable, args=["-m", "rag_agent.cli", "mcp"], env=server_env(), cwd=ROOT
    )

    async def session() -> list[dict[str, Any]]:
        with (tmp_path / "stderr.txt").open("w") as errors:
            async with (
                stdio_client(parameters, errlog=errors) as (read, write),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                return [
                    await ask(client, "leads at Globex"),
                    await ask(client, "only the qualified ones"),
                ]

    first, second = asyncio.run(session())
    assert first["total_count"] == truth("globex")
    assert second["context"]["kind"] == "refine"
    assert second["total_count"] == truth("globex", "qualified")


@pytest.fixture(scope="module")
def agent() -> RAGAgent:
    store = MemoryStore()
    load_sample(store)
    return create_rag_agent(
        kind="memory", llm=False, settings=RAGSettings.from_env({}, llm=False), store=store
    )


def test_two_sessions_of_one_server_keep_their_own_conversations(agent: RAGAgent) -> None:
    server = create_mcp_server(agent)

    async def both() -> tuple[dict[str, Any], ...]:
        async with (
            create_connected_server_and_client_session(server) as one,
            create_connected_server_and_client_session(server) as two,
        ):
            await ask(one, "leads at Globex")
            await ask(two, "leads at Acme")
            one_refined = await ask(one, "only the qualified ones")
            two_refined = await ask(two, "only the qualified ones")
            # The same id named in two sessions is two conversations.
            await ask(one, "leads at Globex", conversation_id="shared")
            two_named = await ask(two, "only the new ones", conversation_id="shared")
            return one_refined, two_refined, two_named

    one_refined, two_refined, two_named = asyncio.run(both())
    assert one_refined["total_count"] == truth("globex", "qualified")
    assert two_refined["total_count"] == truth("acme", "qualified")
    assert two_named.get("context", {}).get("turn") is None  # nothing of session one carried
    assert all(f["column"] != "company_name" for f in two_named.get("filters", []))
