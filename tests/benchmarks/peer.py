"""The peer tool: LangChain's ``QuerySQLDatabaseTool`` over ``SQLDatabase`` (SQLAlchemy + psycopg).

It is what an agent framework offers for the same job: the LLM writes SQL text, the tool runs it
and returns the rows as a string. We give it the very statement our backend sends, with the
values inlined as SQL literals (the tool takes text only), so both sides do the same server work.
Installed by the ``bench`` extra only.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from psycopg import sql
from psycopg.conninfo import conninfo_to_dict


def peer_installed() -> bool:
    """True when the ``bench`` extra (LangChain's SQL tool and SQLAlchemy) is importable."""
    with warnings.catch_warnings():
        # langchain-community announces its own sunset on import; that is news, not an error.
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import langchain_community  # noqa: F401
            import sqlalchemy  # noqa: F401
        except ImportError:
            return False
    return True


def _sqlalchemy_url(dsn: str) -> Any:
    from sqlalchemy.engine import URL

    params = conninfo_to_dict(dsn)
    return URL.create(
        "postgresql+psycopg",
        username=str(params.get("user") or "postgres"),
        password=str(params["password"]) if params.get("password") else None,
        host=str(params.get("host") or "127.0.0.1"),
        port=int(params.get("port") or 5432),
        database=str(params.get("dbname") or "postgres"),
    )


class PeerTool:
    """``QuerySQLDatabaseTool`` bound to ``dsn``; :meth:`query` runs one statement through it."""

    def __init__(self, dsn: str) -> None:
        with warnings.catch_warnings():
            # langchain-community announces its own sunset on import; that is news, not an error.
            warnings.simplefilter("ignore", DeprecationWarning)
            from langchain_community.tools.sql_database.tool import QuerySQLDatabaseTool
            from langchain_community.utilities import SQLDatabase
        self.db = SQLDatabase.from_uri(
            _sqlalchemy_url(dsn), include_tables=["leads"], sample_rows_in_table_info=0
        )
        self.tool = QuerySQLDatabaseTool(db=self.db)

    def query(self, statement: str) -> str:
        """The tool's answer to ``statement`` (a string, as an LLM would receive it)."""
        result: str = self.tool.invoke({"query": statement})
        return result

    def close(self) -> None:
        self.db._engine.dispose()


def inline(statement: bytes, params: Sequence[Any]) -> str:
    """``statement`` with its ``%s`` placeholders replaced by SQL literals of ``params``.

    Benchmark values only: the values are generated here, never user text.
    """
    parts = statement.decode().split("%s")
    assert len(parts) == len(params) + 1, "one literal per placeholder"
    pieces: list[sql.Composable] = [sql.SQL(parts[0])]
    for value, part in zip(params, parts[1:], strict=True):
        pieces += [sql.Literal(value), sql.SQL(part)]
    return sql.Composed(pieces).as_string(None)
