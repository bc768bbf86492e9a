"""``rag-agent mcp``: the read-only tools over MCP (:mod:`rag_agent.mcp_server` does the work)."""

from __future__ import annotations

import argparse
import os
from typing import TextIO

from rag_agent.cli._common import EXIT_OK
from rag_agent.cli.connect import connect
from rag_agent.settings import RAGSettings


def cmd_mcp(args: argparse.Namespace, out: TextIO, err: TextIO, *, settings: RAGSettings) -> int:
    """Serve until the client disconnects (stdio) or the process is interrupted (HTTP).

    stdout belongs to the protocol on stdio: everything this command says goes to stderr.
    """
    from rag_agent.mcp_security import HttpSecurity, server_options
    from rag_agent.mcp_server import create_mcp_server, mcp_tools

    # Checked before connecting: a server that must not start touches no database.
    security = HttpSecurity.from_env(os.environ, allowed_hosts=args.allowed_host)
    if args.http:
        server_options(args.host, args.port, security)
    with connect(args, agent=True, settings=settings) as conn:
        server = create_mcp_server(conn.agent, host=args.host, port=args.port, security=security)
        names = ", ".join(tool.name for tool in mcp_tools(conn.agent))
        if args.http:
            auth = "bearer token" if security.token is not None else "none (loopback only)"
            err.write(
                f"rag-agent: MCP server ({args.backend}) at http://{_authority(args)}/mcp; "
                f"authentication: {auth}; tools: {names}\n"
            )
            err.flush()
            server.run("streamable-http")
        else:
            err.write(f"rag-agent: MCP server ({args.backend}) on stdio; tools: {names}\n")
            err.flush()
            server.run("stdio")
    return EXIT_OK


def _authority(args: argparse.Namespace) -> str:
    host = f"[{args.host}]" if ":" in args.host else args.host
    return f"{host}:{args.port}"
