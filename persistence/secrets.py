"""Secrets never reach a log line: one redaction step for events, exception text and URLs.

:func:`redact_secrets` is a structlog processor. The library's own quiet logger and the CLI put
it in their chains; an application that configures structlog itself adds it before its renderer
(``structlog.configure(processors=[..., persistence.redact_secrets, renderer])``). It masks, in
every string of the event dict (nested ones too, and the ``repr`` of other values):

- the user info of URLs (``postgresql://reader:***@db/app``), found by parsing each URL;
- values of ``password=``, ``apikey:``, ``Authorization: Bearer …`` and similar keys;
- JWT-shaped tokens (Supabase keys) and the secrets the library unwrapped from ``SecretStr``
  settings (DSN passwords, API keys, limiter URL passwords), wherever they appear.

An ``exc_info`` is rendered here as a plain traceback (no local variables, which is where rich's
pretty tracebacks print connection strings) and redacted like any other text.
:func:`redact_text` is the same masking for any text, e.g. in a stdlib ``logging.Formatter``.
Thread-safe: the set of known secrets is guarded by a lock and read as a snapshot.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import structlog

__all__ = [
    "MASK",
    "RedactingFormatter",
    "mask_url",
    "redact_secrets",
    "redact_text",
    "register_secret",
]

#: What a secret is replaced with.
MASK = "***"
# A secret shorter than this is not masked verbatim in free text (it would mask ordinary words);
# the structural rules below still hide it where it sits in a URL or after ``password=``.
_MIN_SECRET = 4
_SECRET_WORDS = r"password|passwd|pwd|apikey|api[_-]?key|authorization|secret|access[_-]?token"  # noqa: S105 - key names, not a password
# Where a URL ends in free text (it starts at a scheme before "://"); masking is done by parsing.
_URL_REST = re.compile(r"[^\s'\"<>`]*")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_MAX_SCHEME = 32
# A run of base64url text and dots, in which a JWT (three dot-separated parts) may sit.
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_.-]{8,}")
_KEYED_VALUE = re.compile(
    rf"(?i)(?P<key>\b(?:{_SECRET_WORDS})\b['\"]?\s*[:=]\s*)"
    r"(?:(?P<quote>['\"])(?P<quoted>(?:Bearer\s+|Basic\s+)?[^'\"]*)(?P=quote)"
    r"|(?P<bare>(?:Bearer\s+|Basic\s+)?[^\s,;&'\"})\]]+))"
)
_API_KEY = re.compile(r"\b(?:sb_secret_|sk-)[A-Za-z0-9_-]{8,}")
_PASSWORD_PARAMS = frozenset({"password", "passwd", "pwd", "apikey", "api_key", "key", "token"})

_known: frozenset[str] = frozenset()
_known_lock = threading.Lock()


def register_secret(secret: str | None) -> None:
    """Remember ``secret`` (and its URL-encoded form) so it is masked wherever it appears."""
    global _known
    if not secret or len(secret) < _MIN_SECRET:
        return
    with _known_lock:
        _known = _known | {secret, quote(secret, safe=""), unquote(secret)}


def register_url_secret(url: str | None) -> None:
    """Register the password (or lone user token) of ``url``'s user info, and of ``password=``."""
    if not url:
        return
    userinfo = _userinfo(url)
    if userinfo is None and "@" in url and "=" not in url:
        # Not a URL a parser accepts (``postgresql//u:pw@h``), yet a driver may echo it.
        userinfo = url.rpartition("@")[0].rpartition("/")[2]
    if userinfo is not None:
        _, colon, password = userinfo.partition(":")
        if colon:  # a lone name is a user name (shown masked, but not hunted for everywhere)
            register_secret(password)
    for match in _KEYED_VALUE.finditer(url):
        register_secret(match.group("quoted") or match.group("bare"))


def _userinfo(url: str) -> str | None:
    """The user info of ``url`` as written, or ``None``; a password may hold ``@ / ? #``."""
    _, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return None
    netloc = urlsplit(url).netloc
    if "@" in netloc and "@" not in rest[len(netloc) :]:
        return netloc.rpartition("@")[0]
    # '@' beyond what urlsplit calls the authority: a password with '/', '?' or '#' in it cut
    # the authority short. A host never holds '@', so the last one ends the user info: this
    # may hide more than the password (an '@' in a query), never less.
    return rest.rpartition("@")[0]


def mask_url(url: str) -> str:
    """``url`` with the password of its user info (or a lone user token) and secret query
    parameters replaced by ``***``; parsed, so a password may hold ``@``, ``/``, ``?`` or ``#``.

    >>> mask_url("redis://:p@ss/w#rd@127.0.0.1:6379/0")
    'redis://:***@127.0.0.1:6379/0'
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    userinfo = _userinfo(url)
    if userinfo is not None:
        user, colon, _ = userinfo.partition(":")
        shown = f"{user}:{MASK}" if colon and not set("/?#") & set(user) else MASK
        rest = f"{shown}@{rest[len(userinfo) + 1 :]}"
    head, qmark, query = rest.partition("?")
    if qmark:
        query, hash_, fragment = query.partition("#")
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(name.lower() in _PASSWORD_PARAMS for name, _ in pairs):
            masked = [(n, MASK if n.lower() in _PASSWORD_PARAMS else v) for n, v in pairs]
            query = urlencode(masked, safe="*")
        rest = f"{head}?{query}{hash_}{fragment}"
    return f"{scheme}://{rest}"


def redact_text(text: str) -> str:
    """``text`` with every secret the module knows how to find replaced by ``***``.

    Linear in the length of ``text`` (log lines may carry hostile input).
    """
    for secret in sorted(_known, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    text = _mask_urls(text)
    text = _KEYED_VALUE.sub(_mask_keyed, text)
    text = _TOKEN_RUN.sub(_mask_jwts, text)
    return _API_KEY.sub(MASK, text)


def _mask_urls(text: str) -> str:
    # Each "://" is looked at once: back over at most _MAX_SCHEME scheme characters, forward to
    # the first delimiter. No pattern backtracks over the text.
    parts: list[str] = []
    done = 0
    hit = text.find("://")
    while hit != -1:
        start = hit
        while start > done and hit - start < _MAX_SCHEME and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        while start < hit and not text[start].isalpha():
            start += 1
        rest = _URL_REST.match(text, hit + 3)
        end = rest.end() if rest else hit + 3
        if start < hit:
            parts += (text[done:start], mask_url(text[start:end]))
            done = end
        hit = text.find("://", max(end, hit + 3))
    parts.append(text[done:])
    return "".join(parts)


def _mask_jwts(run: re.Match[str]) -> str:
    # A JWT is three base64url parts joined by dots, the first one starting "eyJ" (``{"``).
    parts = run.group().split(".")
    for index, part in enumerate(parts[:-1]):
        at = part.find("eyJ")
        if at != -1 and (at == 0 or part[at - 1] == "-") and len(parts[index + 1]) >= 2:
            head = ".".join([*parts[:index], part[:at] + MASK])
            return head + ("." + ".".join(parts[index + 3 :]) if len(parts) > index + 3 else "")
    return run.group()


def _mask_keyed(match: re.Match[str]) -> str:
    value = match.group("quoted") if match.group("quote") else match.group("bare")
    scheme = re.match(r"(?i)(Bearer|Basic)\s+", value)
    masked = f"{scheme.group()}{MASK}" if scheme else MASK
    quote_char = match.group("quote") or ""
    return f"{match.group('key')}{quote_char}{masked}{quote_char}"


def _redact_value(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, bool | int | float) or depth > 8:
        return value
    if isinstance(value, Mapping):
        return {key: _redact_value(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return type(value)(_redact_value(item, depth + 1) for item in value)
    # Any other object is rendered by its repr: keep it unless that repr shows a secret.
    shown = repr(value)
    redacted = redact_text(shown)
    return value if redacted == shown else redacted


def redact_secrets(
    logger: Any, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: mask secrets in every value and in the formatted exception."""
    if event_dict.get("exc_info"):
        # A plain traceback: rich's pretty one prints each frame's locals (DSNs, headers).
        event_dict = structlog.processors.format_exc_info(logger, method, event_dict)
    event_dict.pop("exc_info", None)
    for key, value in event_dict.items():
        event_dict[key] = _redact_value(value)
    return event_dict


class RedactingFormatter(logging.Formatter):
    """A stdlib ``logging.Formatter`` whose output (message, arguments, traceback) is redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))
