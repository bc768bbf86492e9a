"""``rag-agent mcp``: the read-only tools over MCP (:mod:`rag_agent.mcp_server` does the work)."""

from __future__ import annotations

import argparse
import os
from typing import TextIO

from persistence import ReadOnlyPersistenceFacade
from rag_agent.cli._common import EXIT_OK
from rag_agent.cli.connect import connect, sample_note
from rag_agent.settings import RAGSettings


def cmd_mcp(args: argparse.Namespace, out: TextIO, err: TextIO, *, settings: RAGSettings) -> int:
    """Serve until the client disconnects (stdio) or the process is interrupted (HTTP).

    stdout belongs to the protocol on stdio: everything this command says goes to stderr.
    """
    # The server module first: without the SDK it raises the error that names the extra.
    from rag_agent.mcp_server import create_mcp_server, mcp_tools  # noqa: I001
    from rag_agent.mcp_security import HttpSecurity, server_options

    # Checked before connecting: a server that must not start touches no database.
    security = HttpSecurity.from_env(os.environ, allowed_hosts=args.allowed_host)
    if args.http:
        server_options(args.host, args.port, security)
    with connect(args, agent=True, settings=settings) as conn:
        _probe(conn.facade, err)
        server = create_mcp_server(conn.agent, host=args.host, port=args.port, security=security)
        names = ", ".join(tool.name for tool in mcp_tools(conn.agent))
        err.write(sample_note(conn, args, settings))
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


def _probe(facade: ReadOnlyPersistenceFacade, err: TextIO) -> None:
    """Open the backend once before serving: a backend that refuses this configuration (a
    privileged role, a service_role key) would refuse every call, so the server does not start
    (a ``ConfigurationError``: exit 2). One that cannot be reached yet may come up later: the
    server starts, and says so."""
    from persistence import redact_text
    from persistence.errors import BackendError, ConfigurationError

    tables = facade.tables()
    if not tables:
        return
    try:
        facade.column_types(tables[0])
    except ConfigurationError:
        raise
    except BackendError as exc:
        reason = redact_text(" ".join(str(exc).split()))
        err.write(f"rag-agent: warning: the backend did not answer yet: {reason}\n")


def _authority(args: argparse.Namespace) -> str:
    host = f"[{args.host}]" if ":" in args.host else args.host
    return f"{host}:{args.port}"
