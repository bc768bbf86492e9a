"""Supabase API keys: the ``role`` claim of a key, read without verifying it, and the roles a
read-only facade accepts."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

#: The key roles a read-only facade accepts without ``allow_privileged=True``: they are subject
#: to row-level security. Any other role (``service_role``, ``supabase_admin``, ``postgres``, a
#: custom one) might bypass it, so it is refused rather than guessed about.
ALLOWED_KEY_ROLES = frozenset({"anon", "authenticated"})


def _jwt_claims(key: str) -> dict[str, Any] | None:
    """The claims of a JWT-shaped key, read without verifying it (``None`` if it is not one)."""
    parts = key.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    return payload if isinstance(payload, dict) else None


def key_role(key: str) -> str | None:
    """The ``role`` claim of a Supabase API key, read without verifying it (``None`` if opaque).

    New-style secret keys (``sb_secret_...``) count as ``service_role``: they bypass RLS too.
    A key of any other dotted shape (four parts, two...) that carries a role claim in one of
    its parts counts as its most privileged claim: a gateway may accept what the facade cannot
    parse as a JWT, and "opaque" must not mean "harmless".
    """
    if key.startswith("sb_secret_"):
        return "service_role"
    claims = _jwt_claims(key)
    role = claims.get("role") if claims is not None else None
    if isinstance(role, str):
        return role
    claimed = _claimed_roles(key) if claims is None else ()
    beyond = [r for r in claimed if r not in ALLOWED_KEY_ROLES]
    return beyond[0] if beyond else (claimed[0] if claimed else None)


#: Parts of a dotted key searched for a role claim, and the longest part decoded.
_MAX_PARTS = 8
_MAX_PART_CHARS = 16_384


def _claimed_roles(key: str) -> tuple[str, ...]:
    """Every ``role`` claim found in a base64url JSON part of a dotted key (not a JWT)."""
    if "." not in key:
        return ()
    roles = []
    for part in key.split(".", _MAX_PARTS)[:_MAX_PARTS]:
        if not part or len(part) > _MAX_PART_CHARS:
            continue
        try:
            payload = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            continue
        role = payload.get("role") if isinstance(payload, dict) else None
        if isinstance(role, str):
            roles.append(role)
    return tuple(roles)


def _lacks_role_claim(key: str) -> bool:
    """Whether ``key`` is a JWT whose claims name no role (missing, or not a string).

    Which role such a token gets is up to the server's configuration (PostgREST's anonymous
    role, or whatever a gateway maps it to), so the read-only facade cannot tell whether
    row-level security applies to it; it refuses rather than guess.
    """
    claims = _jwt_claims(key)
    return claims is not None and not isinstance(claims.get("role"), str)
