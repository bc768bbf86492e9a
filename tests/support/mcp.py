"""Driving the MCP server with the SDK's own client: in-process, over stdio, over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

from mcp import ClientSession
from mcp.types import CallToolResult, TextContent

from rag_agent.envelope.compact import carries_rows, compact_view
from rag_agent.untrusted import unwrap_boundary

__all__ = [
    "ROOT",
    "envelope_of",
    "free_port",
    "in_process",
    "server_env",
    "serving_http",
    "text_of",
]

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def in_process(server: Any, work: Callable[[ClientSession], Awaitable[T]]) -> T:
    """Run ``work`` with a client session connected to ``server`` over memory streams."""
    from mcp.shared.memory import create_connected_server_and_client_session

    async def session() -> T:
        async with create_connected_server_and_client_session(server) as client:
            return await work(client)

    return asyncio.run(session())


def text_of(result: CallToolResult) -> str:
    """The text of a tool result's single text block."""
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    return result.content[0].text


def envelope_of(result: CallToolResult) -> dict[str, Any]:
    """The envelope of a tool result: its structured content, whose compact view is its text,
    row text between untrusted-data markers (data for the model, never orders)."""
    assert result.structuredContent is not None
    text = text_of(result)
    view = compact_view(result.structuredContent)
    assert ("<<untrusted-data " in text) == carries_rows(view)
    assert json.loads(unwrap_boundary(text)) == view
    return result.structuredContent


def server_env(**extra: str) -> dict[str, str]:
    """The environment of a spawned ``rag-agent mcp``: this source tree, no LLM, no backend."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"RAG_POSTGRES_DSN", "SUPABASE_URL", "SUPABASE_KEY", "RAG_BACKEND"}
    }
    env.update(PYTHONPATH=str(ROOT), RAG_LLM="off", **extra)
    return env


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serving_http(port: int, *args: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``rag-agent mcp --http`` on ``port`` until the block ends; stderr goes to ``log``."""
    command = [sys.executable, "-m", "rag_agent.cli", "mcp", "--http", "--port", str(port), *args]
    with log.open("wb") as errors:
        process = subprocess.Popen(
            command, cwd=ROOT, env=server_env(), stdout=subprocess.DEVNULL, stderr=errors
        )
        try:
            _wait_for_port(port, process)
            yield process
        finally:
            process.terminate()
            process.wait(timeout=30)


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    # Starting Python, the sample data and uvicorn takes a few seconds on a busy machine.
    for _ in range(600):
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        _pause(process, 0.1)
    raise RuntimeError(f"nothing listens on port {port}")


def _pause(process: subprocess.Popen[bytes], seconds: float) -> None:
    # A sleep that ends early when the process exits.
    with suppress(subprocess.TimeoutExpired):
        process.wait(timeout=seconds)
