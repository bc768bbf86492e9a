"""``rag-agent setup``: a PostgreSQL database ready for the agent, in one idempotent command.

With an administrator's DSN it

1. creates the reference tables and indexes (:data:`persistence.schema.REFERENCE`, every
   statement ``IF NOT EXISTS``);
2. loads the bundled sample (rows upserted on ``id``: loading twice leaves one copy), unless
   ``--no-sample``;
3. creates (or brings back to least privilege) a login role that may only read: ``NOSUPERUSER
   NOBYPASSRLS NOCREATEDB NOCREATEROLE NOINHERIT``, ``CONNECT`` on the database, ``USAGE`` on the
   schema, ``SELECT`` on the business tables (:data:`persistence.BUSINESS_TABLES`) and every other
   privilege on them revoked, a connection limit and a server-side statement timeout;
4. creates the indexes ``rag-agent doctor`` checks for (its own report and statements; pg_trgm
   first when the server ships it), unless ``--no-indexes``, so that ``doctor`` then passes;
5. prints the reader DSN, its password masked unless ``--show-password``, and the next command.

The password is ``RAG_READER_PASSWORD`` when set (the command line shows in ``ps``: no flag takes
it), else generated (32 hex characters from :mod:`secrets`) for a new role or with
``--reset-password``; an existing role keeps its password otherwise. Names are checked
identifiers and quoted by psycopg; the password is a quoted literal (``CREATE ROLE`` takes no
bind parameters). Nothing here runs with the reader's rights: this is the one command that
writes, with the DSN the administrator gave.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import urllib.parse
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from persistence import BUSINESS_TABLES, is_identifier
from rag_agent.cli._common import EXIT_OK, UsageError

__all__ = ["DEFAULT_READER_ROLE", "PASSWORD_VARIABLE", "SetupResult", "cmd_setup", "reader_dsn"]

#: The reader role's name unless ``--role`` says otherwise.
DEFAULT_READER_ROLE = "rag_reader"
#: Where a chosen reader password is read from.
PASSWORD_VARIABLE = "RAG_READER_PASSWORD"  # noqa: S105 - a variable's name
_SCHEMA = "public"
_CONNECTION_LIMIT = 20
_STATEMENT_TIMEOUT = "5s"
_KEPT = "unchanged"  # the password's origin when the role keeps its own
_REVOKED = "INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER"


@dataclass
class SetupResult:
    """What ``setup`` did (its ``--json`` output, the DSN masked unless asked)."""

    database: str
    tables: list[str]
    loaded: dict[str, int] = field(default_factory=dict)
    role: str = DEFAULT_READER_ROLE
    role_created: bool = False
    #: Where the password came from: "generated", "given" or "unchanged" (never the password).
    password: str = "unchanged"  # noqa: S105
    granted: list[str] = field(default_factory=list)
    reader_dsn: str = ""
    next: list[str] = field(default_factory=list)
    #: The indexes ``doctor`` asks for that this run created (none with --no-indexes).
    indexes: list[str] = field(default_factory=list)
    #: What could not be created, and why (pg_trgm missing from the server).
    notes: list[str] = field(default_factory=list)


def reader_dsn(admin_dsn: str, role: str, password: str | None) -> str:
    """``admin_dsn`` with the reader's user and password, in the same form (URL or key=value).

    ``password`` ``None`` leaves the password out (the role kept one this command does not know).

    >>> reader_dsn("postgresql://admin:pw@127.0.0.1:5432/app", "rag_reader", "s3cret")
    'postgresql://rag_reader:s3cret@127.0.0.1:5432/app'
    """
    if "://" in admin_dsn:
        parts = urllib.parse.urlsplit(admin_dsn)
        host = parts.netloc.rpartition("@")[2]
        user = urllib.parse.quote(role, safe="")
        if password is not None:
            user += ":" + urllib.parse.quote(password, safe="")
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        kept = [(k, v) for k, v in query if k not in {"user", "password"}]
        return urllib.parse.urlunsplit(
            parts._replace(netloc=f"{user}@{host}", query=urllib.parse.urlencode(kept))
        )
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params: dict[str, Any] = {
        k: v for k, v in conninfo_to_dict(admin_dsn).items() if k != "password"
    }
    params["user"] = role
    if password is not None:
        params["password"] = password
    return make_conninfo("", **params)


def _password(args: argparse.Namespace, exists: bool) -> tuple[str | None, str]:
    given = os.environ.get(PASSWORD_VARIABLE, "")
    if given:
        return given, "given"
    if exists and not args.reset_password:
        return None, _KEPT
    return secrets.token_hex(16), "generated"


def _setup(args: argparse.Namespace, dsn: str) -> SetupResult:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the postgres extra is part of [all]
        raise UsageError('setup needs psycopg: pip install "readonly-rag[postgres]"') from None

    from persistence.errors import BackendUnavailableError
    from rag_agent.cli.connect import mask_dsn

    try:
        return _create(args, dsn)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise UsageError(
            f"the role of {mask_dsn(dsn)} may not do this ({' '.join(str(exc).split())}): setup "
            "needs an administrator, a role that may create tables and roles"
        ) from None
    except psycopg.OperationalError as exc:
        raise BackendUnavailableError(" ".join(str(exc).split())) from None


def _create(args: argparse.Namespace, dsn: str) -> SetupResult:
    import psycopg
    from psycopg import sql

    from persistence.schema import REFERENCE
    from rag_agent.cli.connect import load_sample_into

    role = args.role
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        database = str(conn.execute(b"SELECT current_database()").fetchone()[0])  # type: ignore[index]
        # Constant statements of persistence.schema; nothing typed reaches them.
        for statement in REFERENCE.statements():
            conn.execute(statement.encode())
        result = SetupResult(database=database, tables=sorted(REFERENCE.ddl), role=role)
        if not args.no_sample:
            result.loaded = load_sample_into("postgres", {"dsn": dsn})
        exists = conn.execute(
            b"SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", (role,)
        ).fetchone()
        password, result.password = _password(args, exists is not None)
        result.role_created = exists is None
        options = sql.SQL(
            "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION "
            "CONNECTION LIMIT {limit}"
        ).format(limit=sql.Literal(_CONNECTION_LIMIT))
        if password is not None:
            options = sql.SQL("{} PASSWORD {}").format(options, sql.Literal(password))
        verb = sql.SQL("CREATE ROLE" if exists is None else "ALTER ROLE")
        name = sql.Identifier(role)
        conn.execute(sql.SQL("{} {} {}").format(verb, name, options))
        tables = [
            t
            for t in sorted(BUSINESS_TABLES)
            if conn.execute(b"SELECT to_regclass(%s)", (f"{_SCHEMA}.{t}",)).fetchone() != (None,)
        ]
        table_list = sql.SQL(", ").join(sql.Identifier(_SCHEMA, t) for t in tables)
        for grant in (
            sql.SQL("ALTER ROLE {} SET statement_timeout = {}").format(
                name, sql.Literal(_STATEMENT_TIMEOUT)
            ),
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(database), name),
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(_SCHEMA), name),
            sql.SQL("REVOKE {} ON {} FROM {}").format(sql.SQL(_REVOKED), table_list, name),
            sql.SQL("GRANT SELECT ON {} TO {}").format(table_list, name),
        ):
            conn.execute(grant)
        result.granted = tables
    if not getattr(args, "no_indexes", False):
        _create_indexes(dsn, result)
    shown = reader_dsn(dsn, role, password)
    result.reader_dsn = shown
    return result


def _create_indexes(dsn: str, result: SetupResult) -> None:
    """Create the indexes ``rag-agent doctor`` finds missing, so that ``setup`` then ``doctor``
    passes: the doctor's own report decides which, and its statements create them.

    The trigram indexes need pg_trgm: created when the server ships it (a trusted extension
    since PostgreSQL 13), else left out with a note saying how to get it.
    """
    import psycopg

    from rag_agent.cli.doctor import postgres_reports
    from rag_agent.ops.doctor import TRGM_EXTENSION, IndexKind

    report, _, facts = postgres_reports(dsn)
    missing = [check for check in report.checks if check.missing]
    trigram = [check for check in missing if check.index is IndexKind.TRIGRAM]
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        if trigram and "pg_trgm" not in facts.extensions:
            if "pg_trgm" in facts.available:
                conn.execute(TRGM_EXTENSION.encode())
                result.notes.append("pg_trgm installed (CREATE EXTENSION pg_trgm)")
            else:
                missing = [check for check in missing if check.index is not IndexKind.TRIGRAM]
                result.notes.append(
                    f"{len(trigram)} trigram index(es) left out: this server does not ship "
                    "pg_trgm (install the PostgreSQL contrib package, then run setup again)"
                )
        # The doctor's statements: catalog names, quoted where they must be; nothing typed.
        for check in missing:
            conn.execute(check.statement.encode())
            result.indexes.append(f"{check.table}.{check.column} ({check.index.value})")


def _shown(result: SetupResult, show_password: bool) -> SetupResult:
    from rag_agent.cli.connect import mask_dsn

    # Without a password (the role kept its own) there is nothing to mask.
    hide = not show_password and result.password != _KEPT
    dsn = mask_dsn(result.reader_dsn) if hide else result.reader_dsn
    variable = "RAG_POSTGRES_DSN"
    result.next = [
        f"export {variable}='{dsn}'",
        "rag-agent doctor",
        'rag-agent ask "leads at Acme"',
    ]
    return SetupResult(**{**asdict(result), "reader_dsn": dsn})


def cmd_setup(args: argparse.Namespace, out: TextIO, err: TextIO, *, settings: Any) -> int:
    """Create the tables, load the sample, create the reader role; print the reader DSN."""
    from rag_agent.cli.connect import check_dsn

    if not is_identifier(args.role):
        raise UsageError(f"--role {args.role!r} is not a plain lower-case identifier")
    dsn = args.dsn or os.environ.get("RAG_ADMIN_DSN", "")
    if not dsn:
        raise UsageError("setup needs --dsn (an administrator's DSN) or RAG_ADMIN_DSN")
    check_dsn(dsn)
    args.backend, args.dsn = "postgres", dsn  # error lines name them, the password masked
    result = _shown(_setup(args, dsn), args.show_password)
    if getattr(args, "json", False):
        out.write(json.dumps(asdict(result), ensure_ascii=False) + "\n")
        return EXIT_OK
    out.write(_report(result))
    return EXIT_OK


def _report(result: SetupResult) -> str:
    loaded = ", ".join(f"{n} {t}" for t, n in result.loaded.items()) or "skipped (--no-sample)"
    role_line = {
        "generated": "a generated password",
        "given": f"the password from {PASSWORD_VARIABLE}",
        "unchanged": "its password unchanged (--reset-password for a new one)",
    }[result.password]
    lines = [
        f"database {result.database}: tables ready ({', '.join(result.tables)})",
        f"sample data: {loaded}",
        f"role {result.role} {'created' if result.role_created else 'updated'}, with {role_line}: "
        f"SELECT on {', '.join(result.granted)}; nothing else",
        f"indexes: {len(result.indexes)} created for the filters the agent generates"
        if result.indexes
        else "indexes: none to create",
        *(f"  {note}" for note in result.notes),
        "",
        "reader DSN:",
        f"  {result.reader_dsn}",
    ]
    if "***" in result.reader_dsn:
        lines.append(
            "  (password masked: --show-password prints it; run again with --reset-password "
            f"--show-password for a new one, or set {PASSWORD_VARIABLE})"
        )
    elif result.password == _KEPT:
        lines.append("  (the role kept its password, which this command does not know)")
    lines += ["", "next:", *(f"  {step}" for step in result.next)]
    return "\n".join(lines) + "\n"
