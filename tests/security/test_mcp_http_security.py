"""The MCP server off loopback: no start without a token and allowed hosts; 401 without the
token, 4xx for a forged Host or Origin, bounded sessions and bodies; and no call holds the event
loop while another session waits."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")

import uvicorn
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.memory import create_connected_server_and_client_session
from pydantic import SecretStr

from persistence import (
    AccessPolicy,
    ConfigurationError,
    MemoryStore,
    Page,
    Query,
    ReadOnlyPersistenceFacade,
)
from persistence.backends.memory import MemoryBackend
from persistence.policy import BUSINESS_TABLES
from rag_agent import RAGAgent, RAGSettings
from rag_agent.mcp_security import MIN_TOKEN_LENGTH, HttpSecurity, StaticTokenVerifier
from rag_agent.mcp_server import create_mcp_server
from tests.support.mcp import ROOT, free_port, server_env

CLI = (sys.executable, "-m", "rag_agent.cli")
TOKEN = "t" * 20 + "0123456789abcdefXYZ"
HOST = "mcp.example.com"
ORIGIN = "https://app.example.com"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


def _agent(backend: MemoryBackend) -> RAGAgent:
    facade = ReadOnlyPersistenceFacade(backend, AccessPolicy(BUSINESS_TABLES, frozenset()))
    return RAGAgent(facade, settings=RAGSettings(cache_disabled=True))


class TestRefusalToStart:
    @pytest.mark.parametrize(
        ("security", "missing"),
        [
            (None, "RAG_MCP_TOKEN"),
            (HttpSecurity(allowed_hosts=(HOST,)), "RAG_MCP_TOKEN"),
            (HttpSecurity(token=SecretStr(TOKEN)), "RAG_MCP_ALLOWED_HOSTS"),
        ],
    )
    def test_off_loopback_needs_token_and_hosts(
        self, sample_store: MemoryStore, security: HttpSecurity | None, missing: str
    ) -> None:
        """Beyond loopback, a server without a token or without allowed hosts is refused."""
        agent = _agent(MemoryBackend(sample_store, read_only=True))
        for host in ("0.0.0.0", "192.0.2.7", "::", "mcp.example.com"):
            with pytest.raises(ConfigurationError, match=missing):
                create_mcp_server(agent, host=host, security=security)
        create_mcp_server(agent, host="127.0.0.1", security=security)  # loopback may

    def test_short_token_is_refused(self) -> None:
        """A token shorter than MIN_TOKEN_LENGTH is no authentication."""
        with pytest.raises(ConfigurationError, match=str(MIN_TOKEN_LENGTH)):
            HttpSecurity(token=SecretStr("short"))

    def test_cli_refuses_to_start(self) -> None:
        """`rag-agent mcp --http --host 0.0.0.0` without a token exits with a usage error
        before listening."""
        port = free_port()
        result = subprocess.run(
            [*CLI, "mcp", "--http", "--host", "0.0.0.0", "--port", str(port)],
            cwd=ROOT,
            env=server_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 2
        assert "RAG_MCP_TOKEN" in result.stderr and "refusing" in result.stderr

    def test_token_comparison(self) -> None:
        """The verifier accepts the token only, whatever the other token's length."""
        verifier = StaticTokenVerifier(SecretStr(TOKEN))

        async def check(token: str) -> bool:
            return await verifier.verify_token(token) is not None

        assert asyncio.run(check(TOKEN))
        for other in ("", TOKEN[:-1], TOKEN + "x", TOKEN.upper(), "\udcff" * 3):
            assert not asyncio.run(check(other))


class _ReadyServer(uvicorn.Server):
    """A uvicorn server that says when it listens (no polling)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.ready.set()


@contextmanager
def _serving(app: Any) -> Iterator[str]:
    """``app`` on a loopback port in a thread; yields its base URL."""
    port = free_port()
    server = _ReadyServer(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert server.ready.wait(15) and server.started
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _post(url: str, body: Any = None, **headers: str) -> httpx.Response:
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    sent.update({k.replace("_", "-"): v for k, v in headers.items()})
    return httpx.post(url, json=INITIALIZE if body is None else body, headers=sent, timeout=30)


@pytest.fixture(scope="module")
def url(sample_store: MemoryStore) -> Iterator[str]:
    security = HttpSecurity(
        token=SecretStr(TOKEN),
        allowed_hosts=(HOST, "127.0.0.1:*"),
        allowed_origins=(ORIGIN,),
        max_sessions=3,
        max_request_bytes=64 * 1024,
    )
    agent = _agent(MemoryBackend(sample_store, read_only=True))
    server = create_mcp_server(agent, host="0.0.0.0", security=security)
    with _serving(server.streamable_http_app()) as url:
        yield url


class TestAuthenticatedServer:
    """A server configured for 0.0.0.0 (bound to loopback here), with a token and lists."""

    def test_without_or_with_a_wrong_token_401(self, url: str) -> None:
        for headers in (
            {},
            {"Authorization": "Bearer " + TOKEN[:-1] + "!"},
            {"Authorization": TOKEN},
        ):
            response = _post(url, Host=HOST, **headers)
            assert response.status_code == 401
            assert "Bearer" in response.headers.get("www-authenticate", "")

    def test_forged_host_or_origin_4xx(self, url: str) -> None:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert _post(url, Host="attacker.example", **bearer).status_code == 421
        forged = _post(url, Host=HOST, Origin="https://evil.example", **bearer)
        assert forged.status_code == 403

    def test_with_the_token_a_session_opens(self, url: str) -> None:
        response = _post(url, Host=HOST, Origin=ORIGIN, Authorization=f"Bearer {TOKEN}")
        assert response.status_code == 200
        assert response.headers.get("mcp-session-id")

    def test_the_sdk_client_lists_and_calls(self, url: str) -> None:
        async def session() -> Any:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with (
                httpx.AsyncClient(headers=headers, timeout=30) as http,
                streamable_http_client(url, http_client=http) as (read, write, _),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                return await client.call_tool("count_rows", {"table": "leads"})

        result = asyncio.run(session())
        assert not result.isError and result.structuredContent is not None

    def test_request_body_is_bounded(self, url: str) -> None:
        big = {**INITIALIZE, "padding": "x" * (65 * 1024)}
        response = _post(url, big, Host=HOST, Authorization=f"Bearer {TOKEN}")
        assert response.status_code == 413

    def test_sessions_are_bounded(self, url: str) -> None:
        codes = [
            _post(url, Host=HOST, Authorization=f"Bearer {TOKEN}").status_code for _ in range(5)
        ]
        assert 503 in codes and codes.count(200) <= 3


class HeldMessagesBackend(MemoryBackend):
    """A memory backend whose reads of ``messages`` are held until the test releases them:
    backend work that is long, whatever makes it so, without waiting out a clock. ``entered``
    says a held read has begun; a read is let go after ``HOLD_LIMIT`` seconds at most, so a
    loop it wrongly holds shows up as a light call that long, not as a hung test."""

    HOLD_LIMIT = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entered = threading.Event()
        self.release = threading.Event()

    def read(self, query: Query) -> Page:
        if query.table == "messages":
            self.entered.set()
            self.release.wait(self.HOLD_LIMIT)
        return super().read(query)


class TestNoCallHoldsTheLoop:
    """A slow call of one session never holds another session's light call (the done-when's
    latency check: the light call's latency is measured against its own baseline)."""

    def test_light_call_beside_slow_ones(self, sample_store: MemoryStore) -> None:
        backend = HeldMessagesBackend(sample_store, read_only=True)
        server = create_mcp_server(_agent(backend))
        light = ("count_rows", {"table": "leads", "filters": {"status": "new"}})
        hostile_order = [f"{'-' if i % 2 else ''}{c}" for i in range(20_000) for c in ("id",)]

        async def timed(client: ClientSession) -> float:
            start = time.perf_counter()
            result = await client.call_tool(*light)
            assert not result.isError
            return time.perf_counter() - start

        async def main() -> tuple[float, list[float]]:
            async with (
                create_connected_server_and_client_session(server) as slow,
                create_connected_server_and_client_session(server) as fast,
            ):
                baseline = statistics.median([await timed(fast) for _ in range(5)])
                # A read held in the backend: light calls run while it is held. Were it on the
                # loop, none could finish before its release (HOLD_LIMIT seconds at most).
                held = asyncio.create_task(
                    slow.call_tool("query_table", {"table": "messages", "filters": {"id": 1}})
                )
                assert await asyncio.to_thread(backend.entered.wait, backend.HOLD_LIMIT)
                during_hold = [await timed(fast) for _ in range(5)]
                assert not held.done()  # the light calls ran while the read was still held
                backend.release.set()
                await held
                # A hostile argument (20,000 sort keys) costs its session, never the other's.
                hostile = asyncio.create_task(
                    slow.call_tool("query_table", {"table": "leads", "order": hostile_order})
                )
                during_hostile = [await timed(fast)]
                while not hostile.done():
                    during_hostile.append(await timed(fast))
                await hostile
                return baseline, [max(during_hold), max(during_hostile)]

        baseline, latencies = asyncio.run(main())
        # Generous: a light call waiting for the held read would take HOLD_LIMIT seconds.
        for latency in latencies:
            assert latency < baseline + 0.5, (baseline, latencies)
