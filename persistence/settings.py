"""Connection settings of the bundled backends, read from the environment in one place.

``PersistenceSettings.from_env()`` reads these variables (explicit arguments win); a bad value
raises ``ConfigurationError`` whose message and ``.variable`` name the variable::

    RAG_POSTGRES_DSN            kind="postgres": the connection string (secret)
    RAG_STATEMENT_TIMEOUT_MS    kind="postgres": per-statement timeout [5000]
    SUPABASE_URL, SUPABASE_KEY  kind="supabase": the project URL and its API key (secret)
    RAG_REDACT                  redaction rules, e.g. "*.email=mask:email,leads.notes=drop"
    RAG_REDACTION_KEY           the key of redaction pseudonyms and commitments (secret)
    RAG_REDACT_LOOKUPS          which redacted columns answer exact look-ups: hash | none | all

Backends never read the environment: ``create_read_only_facade`` and
``create_persistence_agent`` fill the options a caller left out from a ``settings=`` argument,
by default ``PersistenceSettings.from_env()`` (read only for a kind that uses it).
``rag_agent.RAGSettings`` extends this class with the retrieval agent's variables.

Constructing the class directly reads no environment (handy in tests); ``from_env`` does.
Settings are immutable, so safe to share between threads; secrets are ``SecretStr`` and URLs are
shown with their password masked, so neither appears in ``repr`` or ``str``.

Example::

    settings = PersistenceSettings.from_env({"RAG_POSTGRES_DSN": "postgresql://reader@db/app"})
    facade = create_read_only_facade(kind="postgres", settings=settings)
"""

from __future__ import annotations

import contextvars
import os
import typing
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AliasChoices,
    BeforeValidator,
    Field,
    SecretStr,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUseDefault
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from persistence.errors import ConfigurationError
from persistence.options import check_options
from persistence.secrets import mask_url, register_secret, register_url_secret

__all__ = [
    "Count",
    "Flag",
    "OptionalText",
    "PersistenceSettings",
    "Secret",
    "Text",
    "mask_userinfo",
    "unprefixed",
]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


def mask_userinfo(url: str) -> str:
    """``url`` with the password (or a lone user token) of its user info replaced by ``***``.

    Parsed, not matched: a password may hold ``@``, ``/`` or ``#`` (see
    :func:`persistence.mask_url`).

    >>> mask_userinfo("redis://:s3cret@127.0.0.1:6379/0")
    'redis://:***@127.0.0.1:6379/0'
    """
    return mask_url(url)


# Environment values arrive as text and are parsed by these validators; values passed in Python
# must already have the field's type (strict: True is not a count, 1.5 is not an int).


def _integer(value: object) -> object:
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise ValueError("is not an integer") from None
    return value


def _flag(value: object) -> object:
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise ValueError("is not a boolean; use 1/true/yes/on or 0/false/no/off")
    return value


def _text(value: object) -> object:
    if isinstance(value, str):
        value = value.strip()
        if not value:
            raise PydanticUseDefault()  # a blank variable counts as unset
    return value


#: An integer; from the environment, its decimal text. Give the minimum with ``Field(ge=...)``.
Count = Annotated[StrictInt, BeforeValidator(_integer)]
#: A boolean; from the environment ``1 true yes on`` / ``0 false no off`` (any case) or blank.
Flag = Annotated[StrictBool, BeforeValidator(_flag)]
#: Text, stripped; blank means unset (the default).
Text = Annotated[StrictStr, BeforeValidator(_text)]
#: Optional text, stripped; blank means unset (the default).
OptionalText = Annotated[StrictStr | None, BeforeValidator(_text)]
#: Optional secret text, stripped; blank means unset. Never shown in ``repr`` or ``str``.
Secret = Annotated[SecretStr | None, BeforeValidator(_text)]


def unprefixed(variable: str) -> Any:
    """A field (default ``None``) read from ``variable`` rather than ``RAG_`` + its name.

    The field's name must be ``variable.lower()``: it is what Python callers pass.
    """
    return Field(None, validation_alias=AliasChoices(variable.lower(), variable))


#: The mapping ``from_env`` reads; unset outside it, so direct construction reads nothing.
_environment: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "persistence_settings_environment", default=None
)


class _Environment(EnvSettingsSource):
    """pydantic-settings' environment source over the mapping handed to ``from_env``."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        env = _environment.get()
        if env is None:
            return {}
        if self.case_sensitive:
            return dict(env)
        return {name.lower(): value for name, value in env.items()}


def _is_secret(field: FieldInfo | None) -> bool:
    return field is not None and SecretStr in typing.get_args(field.annotation)


def _reason(error: Mapping[str, Any]) -> str:
    kind, context = error["type"], error.get("ctx") or {}
    if kind == "value_error":
        return str(context["error"])
    if kind == "greater_than_equal":
        return f"must be at least {context['ge']}"
    if kind.startswith("int_"):
        return "is not an integer"
    if kind.startswith("bool_"):
        return "is not a boolean"
    if kind.startswith("string_"):
        return "is not a string"
    return str(error["msg"]).lower()


class PersistenceSettings(BaseSettings):
    """Connection settings of the postgres and supabase backends (see the module docstring).

    >>> PersistenceSettings.from_env({"RAG_STATEMENT_TIMEOUT_MS": "250"}).statement_timeout_ms
    250
    """

    model_config = SettingsConfigDict(
        env_prefix="RAG_",
        frozen=True,
        extra="forbid",
        hide_input_in_errors=True,
    )

    postgres_dsn: Secret = None
    statement_timeout_ms: Count = Field(5000, ge=1)
    supabase_url: OptionalText = unprefixed("SUPABASE_URL")
    supabase_key: Secret = unprefixed("SUPABASE_KEY")
    #: Redaction rules, ``table.column=spec`` separated by commas (``*`` for every table); see
    #: :mod:`persistence.redaction`. Checked when a facade is built.
    redact: OptionalText = None
    #: Which redacted columns answer exact look-ups: ``hash`` (only hashed ones), ``none``, or
    #: ``all`` (see :mod:`persistence.redaction`).
    redact_lookups: Literal["hash", "none", "all"] = "hash"
    #: The key of the redaction's pseudonyms and commitments (at least 16 bytes).
    redaction_key: Secret = None

    #: The options of the bundled backends these settings supply: kind -> {option: field}.
    BACKEND_OPTIONS: ClassVar[Mapping[str, Mapping[str, str]]] = MappingProxyType(
        {
            "postgres": {"dsn": "postgres_dsn", "statement_timeout_ms": "statement_timeout_ms"},
            "supabase": {"url": "supabase_url", "key": "supabase_key"},
        }
    )

    def __init__(self, **values: Any) -> None:
        check_options(type(self).__name__, values, type(self).model_fields)
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise self._configuration_error(exc, values) from exc

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Arguments first, so they win; then the mapping of from_env; no dotenv, no secret files.
        return init_settings, _Environment(settings_cls)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Self:
        """Settings from ``env`` (``os.environ`` by default), with ``overrides`` winning.

        An unknown override, or a bad value, is a ``ConfigurationError`` naming it.
        """
        token = _environment.set(os.environ if env is None else env)
        try:
            return cls(**overrides)
        finally:
            _environment.reset(token)

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied, validated like the original."""
        check_options(type(self).__name__, changes, type(self).model_fields)
        return type(self)(
            **{**{name: getattr(self, name) for name in type(self).model_fields}, **changes}
        )

    @classmethod
    def env_variables(cls) -> Mapping[str, str]:
        """Field name -> the environment variable it is read from."""
        prefix = cls.model_config.get("env_prefix") or ""
        variables = {}
        for name, field in cls.model_fields.items():
            alias = field.validation_alias
            choices = alias.choices if isinstance(alias, AliasChoices) else ()
            named = [choice for choice in choices if isinstance(choice, str) and choice != name]
            variables[name] = named[0] if named else f"{prefix}{name}".upper()
        return MappingProxyType(variables)

    @classmethod
    def variable(cls, name: str) -> str:
        """The environment variable of field ``name`` (``"postgres_dsn"`` -> RAG_POSTGRES_DSN)."""
        return cls.env_variables()[name]

    def backend_options(
        self, kind: str, options: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """``options`` for a ``kind`` backend, completed from these settings.

        An option that is given (not ``None``) wins; secrets are unwrapped to ``str``; settings
        that are unset add nothing, so the backend's own error says what is missing.
        """
        filled = dict(options or {})
        for option, name in self.BACKEND_OPTIONS.get(kind, {}).items():
            value = getattr(self, name)
            if filled.get(option) is None and value is not None:
                if isinstance(value, SecretStr):
                    value = value.get_secret_value()
                    # Unwrapped, so known to the log redaction from now on.
                    register_url_secret(value) if option == "dsn" else register_secret(value)
                filled[option] = value
        return filled

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # URLs may carry credentials (``redis://:password@host``): shown with them masked.
        for name, value in super().__repr_args__():
            yield name, mask_userinfo(value) if isinstance(value, str) else value

    @classmethod
    def _configuration_error(
        cls, exc: ValidationError, explicit: Mapping[str, Any]
    ) -> ConfigurationError:
        """The first problem of ``exc`` in our words, naming the variable (and the argument)."""
        error = exc.errors()[0]
        fields = {name.lower(): name for name in cls.model_fields}
        fields.update({v.lower(): name for name, v in cls.env_variables().items()})
        location = str(error["loc"][0]) if error["loc"] else ""
        name = fields.get(location.lower(), location)
        variable = cls.env_variables().get(name)
        value = error.get("input")
        if _is_secret(cls.model_fields.get(name)):
            shown = ""  # a secret is never echoed, not even a malformed one
        elif isinstance(value, str):
            shown = f"={mask_userinfo(value)!r}"
        else:
            shown = f"={value!r}"
        if name in explicit:
            return ConfigurationError(
                f"{name}{shown} (env {variable}) {_reason(error)}", variable=variable
            )
        return ConfigurationError(f"{variable}{shown} {_reason(error)}", variable=variable)
