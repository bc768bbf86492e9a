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
    """
    if key.startswith("sb_secret_"):
        return "service_role"
    claims = _jwt_claims(key)
    role = claims.get("role") if claims is not None else None
    return role if isinstance(role, str) else None


def _lacks_role_claim(key: str) -> bool:
    """Whether ``key`` is a JWT whose claims name no role (missing, or not a string).

    Which role such a token gets is up to the server's configuration (PostgREST's anonymous
    role, or whatever a gateway maps it to), so the read-only facade cannot tell whether
    row-level security applies to it; it refuses rather than guess.
    """
    claims = _jwt_claims(key)
    return claims is not None and not isinstance(claims.get("role"), str)
