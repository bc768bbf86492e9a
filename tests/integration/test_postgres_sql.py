"""The PostgreSQL backend's SQL composition and error translation, without a server."""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from persistence import (
    BackendError,
    BackendUnavailableError,
    Filter,
    Op,
    Order,
    Query,
    QueryTimeoutError,
)
from persistence.backends.postgres import sql as _pg_sql
from persistence.backends.postgres.errors import is_connection_lost, translate


def unescape_like(pattern: str) -> str:
    """Inverse of escape_like, for the round-trip property."""
    out, chars = [], iter(pattern)
    for char in chars:
        out.append(next(chars) if char == "\\" else char)
    return "".join(out)


class TestEscapeLike:
    @given(st.text())
    def test_round_trip(self, text: str) -> None:
        """Escaping then unescaping gives the text back: nothing is lost or added."""
        assert unescape_like(_pg_sql.escape_like(text)) == text

    @given(st.text(alphabet="ab%_\\"))
    def test_no_bare_wildcard_survives(self, text: str) -> None:
        """Every % and _ in the escaped text is preceded by an escaping backslash."""
        escaped = _pg_sql.escape_like(text)
        index = 0
        while index < len(escaped):
            if escaped[index] == "\\":
                index += 2
                continue
            assert escaped[index] not in "%_"
            index += 1


class TestComposition:
    def sql_text(self, query: Query) -> str:
        return _pg_sql.build_read(query, "public", ("id", "email"), True).as_string(None)

    def test_values_never_appear_in_sql(self) -> None:
        """Filter values become placeholders, and the parameters carry them."""
        hostile = "x' OR 1=1; DROP TABLE leads; --"
        query = Query(
            "leads",
            (
                Filter("email", Op.EQ, hostile),
                Filter("email", Op.ICONTAINS, hostile),
                Filter("email", Op.IN, [hostile]),
            ),
        )
        text = self.sql_text(query)
        assert "DROP" not in text and "1=1" not in text
        params = _pg_sql.read_params(query)
        assert params[0] == hostile
        assert params[1] == "%x' OR 1=1; DROP TABLE leads; --%"
        assert params[2] == [hostile]

    def test_operators_translate_as_documented(self) -> None:
        """icontains is ILIKE with an explicit ESCAPE; in is = ANY; id breaks ties."""
        query = Query(
            "leads",
            (Filter("email", Op.ICONTAINS, "a"), Filter("score", Op.IN, [1, 2])),
            order=(Order("score", descending=True),),
        )
        text = self.sql_text(query)
        assert "\"email\" ILIKE %s ESCAPE E'\\\\'" in text
        assert '"score" = ANY(%s)' in text
        assert text.endswith('ORDER BY "score" DESC, "id" LIMIT %s OFFSET %s) AS p ON true')

    def test_probing_form_keeps_order_and_values(self) -> None:
        """The probing statement orders both sides of its page alike and binds every value:
        the filters three times (probe, count, ordered page), the probe's bound twice."""
        query = Query(
            "leads",
            (Filter("email", Op.IEQ, "x' OR 1=1 --"),),
            order=(Order("score", descending=True),),
            limit=10,
            offset=5,
        )
        text = _pg_sql.build_read(query, "public", ("id", "email"), True, probe=True)
        composed = text.as_string(None)
        assert composed.count('ORDER BY "score" DESC, "id" LIMIT %s OFFSET %s)') == 2
        assert 'SELECT "id", "email", "score" FROM "public"."leads"' in composed  # the probe
        assert "1=1" not in composed
        params = _pg_sql.read_params(query, probe=True)
        assert params == ["x' OR 1=1 --", 16, 16, "x' OR 1=1 --", 10, 5, "x' OR 1=1 --", 10, 5]
        assert composed.count("%s") == len(params)

    def test_order_on_id_adds_no_second_tie_breaker(self) -> None:
        """An explicit order on id is the tie-breaker already."""
        text = self.sql_text(Query("leads", order=(Order("id", descending=True),)))
        assert 'ORDER BY "id" DESC LIMIT' in text

    def test_one_statement(self) -> None:
        """The composed read is a single statement: no ';' anywhere."""
        assert ";" not in self.sql_text(Query("leads", (Filter("email", Op.EQ, ";"),)))


class TestErrorTranslation:
    @pytest.mark.parametrize(
        ("exc", "expected"),
        [
            (PoolTimeout("no connection"), BackendUnavailableError),
            (pg_errors.QueryCanceled("canceling statement"), QueryTimeoutError),
            (psycopg.OperationalError("connection refused"), BackendUnavailableError),
            (pg_errors.AdminShutdown("terminating connection"), BackendUnavailableError),
            (psycopg.InterfaceError("the connection is closed"), BackendUnavailableError),
            (pg_errors.UndefinedTable("relation does not exist"), BackendError),
            (pg_errors.ReadOnlySqlTransaction("read-only transaction"), BackendError),
        ],
        ids=lambda v: type(v).__name__ if isinstance(v, Exception) else v.__name__,
    )
    def test_each_failure_maps_to_one_error(
        self, exc: Exception, expected: type[BackendError]
    ) -> None:
        """Driver and pool exceptions become exactly the documented error type."""
        error = translate(exc, "read")
        assert type(error) is expected
        assert error.backend == "postgres"
        assert error.operation == "read"

    def test_only_lost_connections_are_retried(self) -> None:
        """A timeout or a SQL error is not a lost connection; a shutdown is."""
        assert is_connection_lost(pg_errors.AdminShutdown("bye"))
        assert not is_connection_lost(pg_errors.QueryCanceled("slow"))
        assert not is_connection_lost(pg_errors.UndefinedColumn("nope"))
        assert not is_connection_lost(ValueError("other"))


class TestMissingDriver:
    def test_missing_psycopg_is_a_configuration_error_with_a_hint(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without psycopg, asking for the backend says which extra to install."""
        import importlib
        import sys

        from persistence import ConfigurationError, create_read_only_facade

        monkeypatch.setitem(sys.modules, "psycopg", None)
        # raising=False: the module is not imported yet when this test runs first.
        monkeypatch.delitem(sys.modules, "persistence.backends.postgres", raising=False)
        with pytest.raises(ConfigurationError, match=r'pip install "readonly-rag\[postgres\]"'):
            importlib.import_module("persistence.backends.postgres")
        with pytest.raises(ConfigurationError, match="readonly-rag"):
            create_read_only_facade(kind="postgres", dsn="postgresql://127.0.0.1/x")
