"""`rag-agent mcp` as a client meets it: spawned over stdio, and over streamable HTTP."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.support.mcp import ROOT, envelope_of, free_port, server_env, serving_http

READ_TOOLS = ["query_leads", "query_table", "rag_agent"]
Exchange = Callable[[ClientSession], Any]


async def _exchange(client: ClientSession) -> dict[str, Any]:
    """What every transport test checks: the listing, one call per tool, and an error."""
    await client.initialize()
    listed = (await client.list_tools()).tools
    calls = {
        "query_leads": await client.call_tool("query_leads", {"company": "Acme", "limit": 3}),
        "query_table": await client.call_tool(
            "query_table", {"table": "leads", "filters": {"company_name": "Globex Corporation"}}
        ),
        "rag_agent": await client.call_tool("rag_agent", {"query": "find leads at acme"}),
    }
    error = await client.call_tool("query_table", {"table": "pg_authid"})
    return {"listed": listed, "calls": calls, "error": error}


def _check(outcome: dict[str, Any]) -> None:
    names = [tool.name for tool in outcome["listed"]]
    assert names[:3] == READ_TOOLS and "deliver_data" not in names
    for tool in outcome["listed"]:
        assert tool.annotations.readOnlyHint is True
        assert tool.annotations.idempotentHint is True
    counts = {}
    for name, result in outcome["calls"].items():
        assert result.isError is False, name
        counts[name] = envelope_of(result)["metadata"]["total_count"]
    assert counts == {"query_leads": 196, "query_table": 320, "rag_agent": 196}
    error = outcome["error"]
    assert error.isError is True
    assert envelope_of(error)["metadata"]["error"]["type"] == "TableNotAllowedError"


class TestStdio:
    """`python -m rag_agent.cli mcp` speaks MCP on stdin/stdout, its status on stderr."""

    def test_list_call_and_error(self, tmp_path: Path) -> None:
        """A spawned server lists the read tools, answers each, and flags the error envelope."""
        parameters = StdioServerParameters(
            command=sys.executable,
            args=["-m", "rag_agent.cli", "mcp"],
            env=server_env(),
            cwd=ROOT,
        )
        log = tmp_path / "stderr.txt"

        async def session() -> dict[str, Any]:
            with log.open("w") as errors:
                async with (
                    stdio_client(parameters, errlog=errors) as (read, write),
                    ClientSession(read, write) as client,
                ):
                    return await _exchange(client)

        _check(asyncio.run(session()))
        status = log.read_text()
        assert "rag-agent: MCP server (memory) on stdio; tools: query_leads" in status
        assert "rag.llm.disabled" not in status  # RAG_LLM=off silences the warning


class TestStreamableHTTP:
    """`rag-agent mcp --http` serves streamable HTTP on the loopback interface."""

    def test_list_call_and_error(self, tmp_path: Path) -> None:
        """Over HTTP the same listing, answers and error flag as over stdio."""
        port = free_port()
        log = tmp_path / "stderr.txt"

        async def session() -> dict[str, Any]:
            async with (
                streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write, _),
                ClientSession(read, write) as client,
            ):
                return await _exchange(client)

        with serving_http(port, log=log):
            outcome = asyncio.run(session())
            # A page from another origin may not drive the local server (DNS rebinding).
            foreign = httpx.post(
                f"http://127.0.0.1:{port}/mcp",
                headers={
                    "Host": "attacker.example",
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
                content=b"{}",
            )
        _check(outcome)
        assert foreign.status_code in (400, 403, 421)
        assert f"at http://127.0.0.1:{port}/mcp" in log.read_text()
