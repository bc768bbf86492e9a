"""What keeps the MCP server's streamable HTTP transport safe: authentication, the Host and
Origin allow-lists, and bounds on sessions and requests.

The SDK turns its DNS-rebinding checks (``Host``/``Origin``) on by itself only for a loopback
address, and has no authentication unless it is given a token verifier. Bound to any other
address, a server without both would hand data to whoever reaches the port. So off loopback the
server **refuses to start** unless it has

* a bearer token, from ``RAG_MCP_TOKEN`` only (never an option, which every local user can read
  with ``ps``), at least :data:`MIN_TOKEN_LENGTH` characters, compared in constant time
  (``hmac.compare_digest``) by the SDK's own bearer authentication (the MCP authorization
  spec's resource-server side: a request without the token gets ``401`` with a
  ``WWW-Authenticate`` header); and
* an explicit list of allowed ``Host`` values (``RAG_MCP_ALLOWED_HOSTS`` or ``--allowed-host``;
  a forged ``Host`` gets ``421``) and, optionally, of allowed ``Origin`` values
  (``RAG_MCP_ALLOWED_ORIGINS``; a browser's request from any other origin gets ``403``).

On every address the server bounds what clients can make it hold: open sessions
(``RAG_MCP_MAX_SESSIONS``; a new one past it gets ``503``), a session's idle time
(``RAG_MCP_SESSION_IDLE_SECONDS``) and a request's body (``RAG_MCP_MAX_REQUEST_BYTES``; larger
gets ``413``).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import SecretStr

from persistence import ConfigurationError

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_IDLE_SECONDS",
    "MIN_TOKEN_LENGTH",
    "HttpSecurity",
    "StaticTokenVerifier",
    "is_loopback",
    "server_options",
]

#: Open sessions at once: each holds its streams and state (about 70 KB), so this bounds memory.
DEFAULT_MAX_SESSIONS = 100
#: A session with no request for this long is closed (the SDK's default is 30 minutes).
DEFAULT_SESSION_IDLE_SECONDS = 600.0
#: A request body larger than this is refused before it is parsed (the SDK's default is 4 MiB);
#: the largest tool call the tools accept is 100,000 characters of text.
DEFAULT_MAX_REQUEST_BYTES = 256 * 1024
#: The shortest bearer token accepted: a guessable token is no authentication.
MIN_TOKEN_LENGTH = 32
#: The client every request with the token is, for the SDK's session ownership checks.
CLIENT_ID = "rag-agent-bearer"

_LOOPBACK_NAMES = frozenset({"localhost"})


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class HttpSecurity:
    """Authentication, allow-lists and bounds of the HTTP transport (see the module doc).

    >>> HttpSecurity.from_env({"RAG_MCP_ALLOWED_HOSTS": "mcp.example.com"}).allowed_hosts
    ('mcp.example.com',)
    """

    token: SecretStr | None = None
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_sessions: int = DEFAULT_MAX_SESSIONS
    session_idle_seconds: float = DEFAULT_SESSION_IDLE_SECONDS
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES

    def __post_init__(self) -> None:
        token = self.token
        if token is not None and len(token.get_secret_value()) < MIN_TOKEN_LENGTH:
            raise ConfigurationError(
                f"RAG_MCP_TOKEN must be at least {MIN_TOKEN_LENGTH} characters (e.g. the output "
                'of python -c "import secrets; print(secrets.token_urlsafe(32))")',
                variable="RAG_MCP_TOKEN",
            )
        for name, value, low in (
            ("RAG_MCP_MAX_SESSIONS", self.max_sessions, 1),
            ("RAG_MCP_MAX_REQUEST_BYTES", self.max_request_bytes, 1024),
        ):
            if type(value) is not int or value < low:
                raise ConfigurationError(
                    f"{name} must be an integer of at least {low}", variable=name
                )
        if not 0 < self.session_idle_seconds < float("inf"):
            raise ConfigurationError(
                "RAG_MCP_SESSION_IDLE_SECONDS must be a positive number of seconds",
                variable="RAG_MCP_SESSION_IDLE_SECONDS",
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, allowed_hosts: Sequence[str] = ()) -> HttpSecurity:
        """The settings in ``env`` (``os.environ`` by the CLI); ``allowed_hosts`` given as
        options are added to ``RAG_MCP_ALLOWED_HOSTS``."""
        token = env.get("RAG_MCP_TOKEN", "").strip()
        return cls(
            token=SecretStr(token) if token else None,
            allowed_hosts=(*_listed(env.get("RAG_MCP_ALLOWED_HOSTS", "")), *allowed_hosts),
            allowed_origins=_listed(env.get("RAG_MCP_ALLOWED_ORIGINS", "")),
            max_sessions=_number(env, "RAG_MCP_MAX_SESSIONS", DEFAULT_MAX_SESSIONS, int),
            session_idle_seconds=_number(
                env, "RAG_MCP_SESSION_IDLE_SECONDS", DEFAULT_SESSION_IDLE_SECONDS, float
            ),
            max_request_bytes=_number(
                env, "RAG_MCP_MAX_REQUEST_BYTES", DEFAULT_MAX_REQUEST_BYTES, int
            ),
        )


class StaticTokenVerifier:
    """The SDK's ``TokenVerifier`` for one shared bearer token, compared in constant time."""

    def __init__(self, token: SecretStr) -> None:
        self._token = token.get_secret_value().encode("utf-8")

    async def verify_token(self, token: str) -> AccessToken | None:
        """An access token for the one client when ``token`` is the configured one."""
        given = token.encode("utf-8", "surrogatepass")
        # compare_digest takes time in the length of its arguments, never in where they differ.
        if not hmac.compare_digest(given, self._token):
            return None
        return AccessToken(token="", client_id=CLIENT_ID, scopes=[])


def server_options(host: str, port: int, security: HttpSecurity | None) -> dict[str, Any]:
    """``FastMCP`` keyword arguments for serving on ``host:port`` with ``security``.

    Raises ``ConfigurationError`` for an address beyond loopback without a token and an
    allowed-hosts list: such a server must not start.
    """
    security = security or HttpSecurity()
    loopback = is_loopback(host)
    if not loopback:
        missing = []
        if security.token is None:
            missing.append("a bearer token in RAG_MCP_TOKEN")
        if not security.allowed_hosts:
            missing.append(
                "the Host values clients use, in RAG_MCP_ALLOWED_HOSTS or --allowed-host"
            )
        if missing:
            raise ConfigurationError(
                f"refusing to serve MCP on {host}, beyond the loopback interface, without "
                + " and ".join(missing)
                + " (see docs/mcp.md)",
                variable="RAG_MCP_TOKEN" if security.token is None else "RAG_MCP_ALLOWED_HOSTS",
            )
    options: dict[str, Any] = {
        "max_sessions": security.max_sessions,
        "session_idle_timeout": security.session_idle_seconds,
        "max_request_body_size": security.max_request_bytes,
    }
    if security.allowed_hosts or not loopback:
        options["transport_security"] = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(security.allowed_hosts),
            allowed_origins=list(security.allowed_origins),
        )
    if security.token is not None:
        authority = f"[{host}]" if ":" in host else host
        options["token_verifier"] = StaticTokenVerifier(security.token)
        # No authorization server: the token is shared out of band. The issuer is required by
        # the SDK's settings and only published with protected-resource metadata, which a
        # server without resource_server_url does not serve.
        options["auth"] = AuthSettings(
            issuer_url=f"http://{authority}:{port}",  # type: ignore[arg-type]
            resource_server_url=None,
            required_scopes=[],
        )
    return options


def _listed(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _number(env: Mapping[str, str], name: str, default: Any, kind: type) -> Any:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        return kind(text)
    except ValueError:
        raise ConfigurationError(f"{name} is not a number: {text[:40]!r}", variable=name) from None
