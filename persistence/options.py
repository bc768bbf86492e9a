"""The checks every factory makes on its keyword options, worded once.

Backends' ``create_backend`` hooks and the settings' ``from_env``/``replace`` refuse a misspelt
option the same way, and a missing connection setting names both the argument and the variable.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import SecretStr

from persistence.errors import ConfigurationError
from persistence.secrets import register_secret, register_url_secret

# Connection options that carry a secret (a DSN's password, an API key).
_SECRET_OPTIONS = frozenset({"dsn", "key"})


def check_options(owner: str, given: Iterable[str], accepted: Iterable[str]) -> None:
    """Refuse names in ``given`` that are not in ``accepted``: a typo is an error, never ignored.

    >>> check_options("kind='memory'", ["stor"], ["store"])
    Traceback (most recent call last):
    ...
    persistence.errors.ConfigurationError: unknown option(s) for kind='memory': stor; accepted: ...
    """
    known = sorted(accepted)
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ConfigurationError(
            f"unknown option(s) for {owner}: {', '.join(unknown)}; accepted: {', '.join(known)}"
        )


def require_text(kind: str, option: str, value: object, *, what: str, variable: str) -> str:
    """The text of a required connection option, unwrapped if it is a ``SecretStr``.

    Missing or blank raises ``ConfigurationError`` naming the argument and the variable the
    factories read it from (``kind='postgres' needs a connection string: pass dsn= or set
    RAG_POSTGRES_DSN``).
    """
    secret = isinstance(value, SecretStr) or option in _SECRET_OPTIONS
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ConfigurationError(
            f"kind={kind!r} needs {what}: pass {option}= or set {variable}", variable=variable
        )
    if not isinstance(value, str):
        raise ConfigurationError(
            f"{option}= must be a str, not {type(value).__name__}", variable=variable
        )
    if secret:
        # Known from now on to the log redaction, wherever it turns up (a traceback, a repr).
        register_url_secret(value) if option == "dsn" else register_secret(value)
    return value
