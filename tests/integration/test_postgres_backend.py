"""The PostgreSQL backend against the real server: enforcement, failures, catalog, configuration."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import pytest
from psycopg.pq import TransactionStatus
from structlog.testing import capture_logs

from persistence import (
    BackendError,
    BackendUnavailableError,
    ColumnNotAllowedError,
    ConfigurationError,
    Filter,
    InvalidQueryError,
    Op,
    Order,
    PersistencePermissionError,
    PersistenceSettings,
    Query,
    QueryTimeoutError,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.backends.postgres import PostgresBackend, create_backend
from tests.conftest import PostgresDatabase

pytestmark = pytest.mark.postgres

LEADS = [
    {"email": "ann@acme.io", "company_name": "Acme Inc.", "score": 10},
    {"email": "bob@acme.io", "company_name": "ACME corp", "score": 20},
    {"email": "cy@globex.com", "company_name": "Globex", "score": None},
]


@pytest.fixture
def db(postgres_clean: PostgresDatabase) -> PostgresDatabase:
    """The session database, emptied, with three leads written by the read-write role."""
    with create_persistence_agent(kind="postgres", dsn=postgres_clean.writer_dsn) as writer:
        writer.batch("leads", LEADS)
    return postgres_clean


@pytest.fixture
def backend(db: PostgresDatabase) -> Iterator[PostgresBackend]:
    """A read-only backend as the least-privilege role, with a one-connection pool."""
    with create_backend(dsn=db.reader_dsn, pool_max_size=1) as backend:
        yield backend


def session_state(backend: PostgresBackend) -> dict[str, Any]:
    """What a lent connection carries between calls, read on that very connection (the pool
    has one, whether the stash or the pool lends it)."""

    def state(conn: Any) -> dict[str, Any]:
        row = conn.execute(
            "SELECT current_setting('statement_timeout'),"
            " current_setting('transaction_read_only'),"
            " (SELECT count(*) FROM pg_locks"
            "  WHERE locktype = 'advisory' AND pid = pg_backend_pid())"
        ).fetchone()
        assert row is not None
        return {
            "status": TransactionStatus(conn.pgconn.transaction_status).name,
            "statement_timeout": row[0],
            "read_only": row[1],
            "advisory_locks": row[2],
        }

    result: dict[str, Any] = backend._connections.run(state, "state", read=True)
    return result


class TestReadOnlyEnforcement:
    def test_reads_run_in_read_only_transactions(self, backend: PostgresBackend) -> None:
        """The server itself marks every transaction of a read-only backend READ ONLY."""
        backend.columns("leads")
        assert session_state(backend)["read_only"] == "on"

    def test_a_write_slipped_past_the_code_is_refused_by_the_server(
        self, db: PostgresDatabase, backend: PostgresBackend
    ) -> None:
        """Even a buggy write on the facade's own connection fails, and changes nothing."""

        def rogue(conn: Any) -> None:
            conn.execute("INSERT INTO leads (email) VALUES ('evil@x.io')")

        with pytest.raises(BackendError) as info:
            backend._connections.run(rogue, "read", read=True)
        assert info.value.__cause__ is not None
        assert db.execute("SELECT count(*) FROM leads WHERE email = 'evil@x.io'") == [(0,)]

    def test_read_only_backend_refuses_writes_itself(self, backend: PostgresBackend) -> None:
        """insert, upsert and delete on a read-only backend raise before any SQL."""
        with pytest.raises(PersistencePermissionError):
            backend.insert("leads", [{"email": "x@y.z"}])
        with pytest.raises(PersistencePermissionError):
            backend.upsert("leads", [{"id": 1, "email": "x@y.z"}])
        with pytest.raises(PersistencePermissionError):
            backend.delete("leads", [Filter("id", Op.EQ, 1)])

    def test_superuser_is_refused_for_the_read_only_facade(self, db: PostgresDatabase) -> None:
        """A superuser DSN is a configuration error unless allow_privileged=True."""
        with (
            create_read_only_facade(kind="postgres", dsn=db.admin_dsn) as facade,
            pytest.raises(ConfigurationError, match="allow_privileged"),
        ):
            facade.read("leads")

    def test_allow_privileged_accepts_with_a_warning(self, db: PostgresDatabase) -> None:
        """allow_privileged=True reads, and logs that the role is privileged."""
        with (
            capture_logs() as logs,
            create_read_only_facade(
                kind="postgres", dsn=db.admin_dsn, allow_privileged=True
            ) as facade,
        ):
            assert facade.read("leads").total_count == len(LEADS)
        events = [entry["event"] for entry in logs if entry["log_level"] == "warning"]
        assert "postgres.privileged_role" in events

    def test_role_with_write_grants_is_refused(self, db: PostgresDatabase) -> None:
        """A read-only facade connected as a role that can write is refused, naming the tables;
        allow_privileged=True accepts it with one warning."""
        with (
            pytest.raises(ConfigurationError, match=r"may INSERT, UPDATE or DELETE on .*leads"),
            create_read_only_facade(kind="postgres", dsn=db.writer_dsn) as facade,
        ):
            facade.count("leads")
        with (
            capture_logs() as logs,
            create_read_only_facade(
                kind="postgres", dsn=db.writer_dsn, allow_privileged=True
            ) as facade,
        ):
            facade.count("leads")
        warnings = [entry for entry in logs if entry["event"] == "postgres.privileged_role"]
        assert len(warnings) == 1 and "leads" in " ".join(warnings[0]["problems"])

    @pytest.mark.parametrize(
        "grant",
        [
            "pg_read_all_data",
            "pg_write_all_data",
            "pg_read_server_files",
            "pg_execute_server_program",
        ],
    )
    def test_a_reader_with_a_powerful_predefined_role_is_refused(
        self, db: PostgresDatabase, grant: str
    ) -> None:
        """SELECT-only on the tables is not enough: membership of a predefined role that reads
        or writes anything or reaches the server's files is refused too."""
        db.execute(f"GRANT {grant} TO {db.reader_role}")
        try:
            with (
                pytest.raises(ConfigurationError, match=grant),
                create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade,
            ):
                facade.count("leads")
        finally:
            db.execute(f"REVOKE {grant} FROM {db.reader_role}")

    def test_a_role_search_path_cannot_shadow_the_catalog(self, db: PostgresDatabase) -> None:
        """A writer whose own search_path puts a schema with a lying has_table_privilege (and
        lower) before pg_catalog is still refused: the catalog functions are called by their
        qualified names, under search_path=pg_catalog."""
        evil = f"{db.name}_evil"
        db.execute(f"CREATE SCHEMA {evil}")
        try:
            db.execute(f"GRANT USAGE ON SCHEMA {evil} TO {db.writer_role}")
            db.execute(
                f"CREATE FUNCTION {evil}.has_table_privilege(oid, text) RETURNS boolean "
                "LANGUAGE sql AS 'SELECT false'"
            )
            db.execute(
                f"ALTER ROLE {db.writer_role} IN DATABASE {db.name} "
                f"SET search_path = {evil}, pg_catalog, public"
            )
            with (
                pytest.raises(ConfigurationError, match="may INSERT, UPDATE or DELETE"),
                create_read_only_facade(kind="postgres", dsn=db.writer_dsn) as facade,
            ):
                facade.count("leads")
        finally:
            db.execute(f"ALTER ROLE {db.writer_role} IN DATABASE {db.name} RESET search_path")
            db.execute(f"DROP SCHEMA {evil} CASCADE")

    def test_a_role_the_catalog_does_not_show_is_not_vouched_for(self) -> None:
        """No row for the connected role (a shadowed or filtered catalog) is a problem, never a
        pass; a plain reader has none."""
        from persistence.backends.postgres.catalog import RoleFacts, role_problems

        assert role_problems(None, ()) == [
            "the connected role is not visible in pg_catalog.pg_roles"
        ]
        assert role_problems(RoleFacts("reader", False, False), ()) == []

    def test_a_reader_that_can_become_a_superuser_is_refused(self, db: PostgresDatabase) -> None:
        """A role granted a superuser role (so it can SET ROLE to it) is refused, through a
        role in between too."""
        power, middle = f"{db.name}_power", f"{db.name}_middle"
        db.execute(f"CREATE ROLE {power} SUPERUSER NOLOGIN")
        db.execute(f"CREATE ROLE {middle} NOLOGIN")
        try:
            db.execute(f"GRANT {power} TO {middle}")
            db.execute(f"GRANT {middle} TO {db.reader_role}")
            with (
                pytest.raises(ConfigurationError, match=power),
                create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade,
            ):
                facade.count("leads")
        finally:
            db.execute(f"REVOKE {middle} FROM {db.reader_role}")
            db.execute(f"DROP ROLE IF EXISTS {middle}")
            db.execute(f"DROP ROLE IF EXISTS {power}")

    def test_a_noinherit_reader_that_can_become_a_writer_is_refused(
        self, db: PostgresDatabase
    ) -> None:
        """A NOINHERIT role does not hold its roles' privileges until it runs SET ROLE, which
        any session of it can: a writer it can become makes it a writer."""
        db.execute(f"ALTER ROLE {db.reader_role} NOINHERIT")
        db.execute(f"GRANT {db.writer_role} TO {db.reader_role}")
        try:
            with (
                pytest.raises(ConfigurationError, match=r"may INSERT, UPDATE or DELETE on .*leads"),
                create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade,
            ):
                facade.count("leads")
        finally:
            db.execute(f"REVOKE {db.writer_role} FROM {db.reader_role}")
            db.execute(f"ALTER ROLE {db.reader_role} INHERIT")

    def test_least_privilege_role_reads_without_warnings(self, db: PostgresDatabase) -> None:
        """The SELECT-only role logs no privilege warning."""
        with (
            capture_logs() as logs,
            create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as facade,
        ):
            facade.count("leads")
        assert [entry for entry in logs if entry["log_level"] == "warning"] == []


class TestFailures:
    @pytest.fixture
    def slow_view(self, db: PostgresDatabase) -> Iterator[str]:
        """A view whose every read sleeps two seconds."""
        db.execute("CREATE VIEW slow_leads AS SELECT 1::bigint AS id, pg_sleep(2) IS NULL AS done")
        db.execute(f"GRANT SELECT ON slow_leads TO {db.reader_role}")
        yield "slow_leads"
        db.execute("DROP VIEW slow_leads")

    def test_slow_read_times_out(self, db: PostgresDatabase, slow_view: str) -> None:
        """A read past statement_timeout_ms ends in QueryTimeoutError, promptly."""
        with create_read_only_facade(
            kind="postgres", dsn=db.reader_dsn, tables=[slow_view], statement_timeout_ms=200
        ) as facade:
            facade.columns(slow_view)  # start-up outside the timed part
            start = time.monotonic()
            with pytest.raises(QueryTimeoutError) as info:
                facade.read(slow_view)
            elapsed = time.monotonic() - start
        assert 0.2 <= elapsed < 1.5
        assert info.value.__cause__ is not None

    def test_timeout_from_environment(
        self, db: PostgresDatabase, slow_view: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """RAG_STATEMENT_TIMEOUT_MS sets the timeout when no argument is given."""
        monkeypatch.setenv("RAG_STATEMENT_TIMEOUT_MS", "150")
        with (
            create_read_only_facade(
                kind="postgres", dsn=db.reader_dsn, tables=[slow_view]
            ) as facade,
            pytest.raises(QueryTimeoutError),
        ):
            facade.read(slow_view)

    def test_connection_is_clean_after_a_timeout(
        self, db: PostgresDatabase, slow_view: str
    ) -> None:
        """After a timed-out read the pooled connection is idle, and the next read works."""
        with create_backend(
            dsn=db.reader_dsn, pool_max_size=1, statement_timeout_ms=200
        ) as backend:
            with pytest.raises(QueryTimeoutError):
                backend.read(Query(slow_view))
            state = session_state(backend)
            assert state["status"] == "IDLE"
            assert state["statement_timeout"] == "200ms"
            assert backend.count("leads", []) == len(LEADS)

    def test_state_left_by_a_failed_call_is_reset(self, backend: PostgresBackend) -> None:
        """A call that fails after taking a lock and changing a setting leaves neither behind."""

        def messy(conn: Any) -> None:
            conn.execute("SELECT pg_advisory_lock(42)")
            conn.execute("SET statement_timeout = 1")
            conn.execute("BEGIN")
            conn.execute("SELECT 1/0")

        with pytest.raises(BackendError):
            backend._connections.run(messy, "read", read=True)
        state = session_state(backend)
        assert state == {
            "status": "IDLE",
            "statement_timeout": "5s",
            "read_only": "on",
            "advisory_locks": 0,
        }

    def test_clean_reads_leave_nothing_behind(self, backend: PostgresBackend) -> None:
        """After ordinary reads the connection is idle with its session defaults."""
        backend.count("leads", [Filter("score", Op.GT, 1)])
        assert session_state(backend) == {
            "status": "IDLE",
            "statement_timeout": "5s",
            "read_only": "on",
            "advisory_locks": 0,
        }

    def test_terminated_connection_is_survived(
        self, db: PostgresDatabase, backend: PostgresBackend
    ) -> None:
        """When the server kills the pooled connections, the next read still succeeds."""
        assert backend.count("leads", []) == len(LEADS)
        killed = db.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND usename = %s",
            (db.reader_role,),
        )
        assert killed and all(row[0] for row in killed)
        assert backend.count("leads", []) == len(LEADS)

    def test_unreachable_server_fails_fast(self) -> None:
        """Nothing listening: BackendUnavailableError within the connect timeout."""
        with create_read_only_facade(
            kind="postgres", dsn="postgresql://nobody@127.0.0.1:1/none", connect_timeout=1
        ) as facade:
            start = time.monotonic()
            with pytest.raises(BackendUnavailableError) as info:
                facade.read("leads")
            assert time.monotonic() - start < 2
        assert info.value.__cause__ is not None

    def test_exhausted_pool_is_unavailable(self, backend: PostgresBackend) -> None:
        """No free connection within pool_timeout is BackendUnavailableError."""
        with create_backend(
            dsn=backend._connections.dsn, pool_max_size=1, pool_timeout=0.2
        ) as tight:
            pool = tight._connections.pool()
            held = pool.getconn()
            try:
                with pytest.raises(BackendUnavailableError):
                    tight.count("leads", [])
            finally:
                pool.putconn(held)

    def test_closed_backend_refuses_use(self, db: PostgresDatabase) -> None:
        """After close() the backend raises instead of reconnecting."""
        backend = create_backend(dsn=db.reader_dsn)
        backend.close()
        with pytest.raises(BackendError, match="closed"):
            backend.count("leads", [])


class TestCatalog:
    def test_unknown_column_fails_before_any_query(
        self, backend: PostgresBackend, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An unknown column is ColumnNotAllowedError from the cached catalog, with no SQL sent."""
        backend.columns("leads")
        sent: list[str] = []
        monkeypatch.setattr(backend._connections, "run", lambda *a, **k: sent.append("sql"))
        with pytest.raises(ColumnNotAllowedError) as info:
            backend.read(Query("leads", (Filter("password", Op.EQ, "x"),)))
        assert info.value.column == "password"
        with pytest.raises(ColumnNotAllowedError):
            backend.read(Query("leads", columns=("secret",)))
        with pytest.raises(ColumnNotAllowedError) as info:
            backend.read(Query("leads", order=("rank",)))
        assert (info.value.column, info.value.operation) == ("rank", "read")
        with pytest.raises(ColumnNotAllowedError) as info:
            backend.count("leads", (Filter("password", Op.EQ, "x"),))
        assert (info.value.column, info.value.operation) == ("password", "count")
        assert sent == []

    def test_first_missing_column_is_named(self, backend: PostgresBackend) -> None:
        """Of several unknown columns, the first named (or first sorted, from a set) is reported."""
        backend.columns("leads")
        with pytest.raises(ColumnNotAllowedError) as info:
            backend._table("leads").require("leads", ["email", "zeta", "alpha"], "upsert")
        assert (info.value.column, info.value.operation) == ("zeta", "upsert")
        with pytest.raises(ColumnNotAllowedError) as info:
            backend._table("leads").require("leads", frozenset({"email", "zeta", "alpha"}), "read")
        assert info.value.column == "alpha"

    def test_new_table_is_found_after_the_retry_interval(self, db: PostgresDatabase) -> None:
        """A table created after start-up is seen once the catalog may be reloaded."""
        now = [0.0]
        with create_backend(dsn=db.reader_dsn, clock=lambda: now[0]) as backend:
            assert backend.columns("leads")
            db.execute("CREATE TABLE late_table (id bigint primary key, note text)")
            try:
                with pytest.raises(BackendError, match="does not exist"):
                    backend.columns("late_table")
                now[0] += 10
                assert backend.columns("late_table") == frozenset({"id", "note"})
            finally:
                db.execute("DROP TABLE late_table")

    def test_column_types_come_from_the_catalog(self, db: PostgresDatabase) -> None:
        """Enums and domains over text are text, arrays and inet are other, in table order."""
        db.execute("CREATE TYPE lead_stage AS ENUM ('cold', 'warm')")
        db.execute("CREATE DOMAIN short_code AS varchar(8)")
        db.execute(
            "CREATE TABLE typed_probe (id uuid primary key, stage lead_stage, code short_code,"
            " tags text[], addr inet, at timestamp(3) with time zone, n numeric(10, 2))"
        )
        db.execute(f"GRANT SELECT ON typed_probe TO {db.reader_role}")
        try:
            with create_backend(dsn=db.reader_dsn) as backend:
                types = backend.column_types("typed_probe")
                assert types is not None
                assert {c: t.kind.value for c, t in types.items()} == {
                    "id": "uuid",
                    "stage": "text",
                    "code": "text",
                    "tags": "other",
                    "addr": "other",
                    "at": "timestamptz",
                    "n": "numeric",
                }
                assert list(types) == ["id", "stage", "code", "tags", "addr", "at", "n"]
                stage = Filter("stage", Op.EQ, "warm")
                assert backend.count("typed_probe", [stage]) == 0
        finally:
            db.execute("DROP TABLE typed_probe")
            db.execute("DROP DOMAIN short_code")
            db.execute("DROP TYPE lead_stage")

    def test_columns_lists_the_readable_columns(self, backend: PostgresBackend) -> None:
        """columns() is the catalog's column set of the table."""
        assert {"id", "email", "company_name", "score"} <= (backend.columns("leads") or set())


class TestTypedValues:
    @pytest.mark.parametrize(
        "flt",
        [
            Filter("score", Op.IN, [1, "two"]),
            Filter("id", Op.GT, True),
            Filter("email", Op.EQ, 5),
            Filter("created_at", Op.GT, "yesterday"),
            Filter("score", Op.ICONTAINS, "1"),
            Filter("id", Op.ILIKE, "1%"),
        ],
        ids=str,
    )
    def test_value_that_does_not_fit_the_column_is_a_typed_error(
        self, backend: PostgresBackend, flt: Filter
    ) -> None:
        """A value of the wrong type is InvalidQueryError, never a driver exception."""
        with pytest.raises(InvalidQueryError, match=f"leads.{flt.column}"):
            backend.read(Query("leads", (flt,)))
        with pytest.raises(InvalidQueryError, match=f"leads.{flt.column}"):
            backend.count("leads", [flt])

    @pytest.mark.parametrize(
        ("given", "typed"),
        [
            (Filter("score", Op.EQ, "20"), Filter("score", Op.EQ, 20)),
            (Filter("score", Op.IN, ["10", 30]), Filter("score", Op.IN, [10, 30])),
            (Filter("id", Op.LTE, " 2 "), Filter("id", Op.LTE, 2)),
            (
                Filter("created_at", Op.GT, dt.date(2024, 1, 1)),
                Filter("created_at", Op.GT, dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),
            ),
        ],
        ids=str,
    )
    def test_value_that_converts_is_read_as_the_column_type(
        self, backend: PostgresBackend, given: Filter, typed: Filter
    ) -> None:
        """A string or date that converts to the column's type answers as the typed value."""
        want = backend.read(Query("leads", (typed,)))
        assert backend.read(Query("leads", (given,))) == want
        assert backend.count("leads", [given]) == want.total_count

    def test_mixed_numbers_in_a_list(self, backend: PostgresBackend) -> None:
        """IN with ints, floats and Decimals compares numerically."""
        from decimal import Decimal

        page = backend.read(Query("leads", (Filter("score", Op.IN, [10, 20.0, Decimal(30)]),)))
        assert sorted(row["score"] for row in page.rows) == [10, 20]


class TestPages:
    def test_page_past_the_end_keeps_the_total(self, backend: PostgresBackend) -> None:
        """An empty page still carries the number of matches, in the same statement."""
        page = backend.read(Query("leads", limit=5, offset=50))
        assert page.rows == []
        assert page.total_count == len(LEADS)

    def test_projection_without_id_keeps_all_null_rows(self, backend: PostgresBackend) -> None:
        """A projected row whose every value is NULL is still a row."""
        page = backend.read(
            Query("leads", (Filter("score", Op.IS_NULL, True),), columns=("score",))
        )
        assert page.rows == [{"score": None}]

    def test_transaction_pooler_mode_reads_the_same(self, db: PostgresDatabase) -> None:
        """transaction_pooler=True (explicit READ ONLY transactions, no prepared statements)."""
        query_args: dict[str, Any] = {"order": [Order("score", descending=True)], "limit": 2}
        with (
            create_read_only_facade(kind="postgres", dsn=db.reader_dsn) as direct,
            create_read_only_facade(
                kind="postgres", dsn=db.reader_dsn, transaction_pooler=True
            ) as pooled,
        ):
            for _ in range(7):  # past psycopg's prepare threshold
                assert pooled.read("leads", **query_args) == direct.read("leads", **query_args)
            backend = pooled._backend()
            assert isinstance(backend, PostgresBackend)
            conn = backend._connections.pool().getconn()
            try:
                assert conn.prepare_threshold is None
                assert conn.execute("SHOW transaction_read_only").fetchone() == ("off",)
            finally:
                backend._connections.pool().putconn(conn)


class TestWrites:
    def test_explicit_ids_do_not_collide_with_later_ones(self, db: PostgresDatabase) -> None:
        """After a row written with id 100, a row without an id gets 101, as in memory."""
        with create_persistence_agent(kind="postgres", dsn=db.writer_dsn) as writer:
            writer.write("leads", {"id": 100, "email": "hundred@x.io"})
            assert writer.write("leads", {"email": "next@x.io"})["id"] == 101

    def test_upsert_inserts_rows_without_the_key(self, db: PostgresDatabase) -> None:
        """upsert of a row with no id inserts it."""
        with create_persistence_agent(kind="postgres", dsn=db.writer_dsn) as writer:
            rows = writer.upsert("leads", [{"email": "new@x.io"}])
            assert rows[0]["id"] == len(LEADS) + 1

    def test_upsert_with_only_the_key_returns_the_row(self, db: PostgresDatabase) -> None:
        """upsert of just an existing id changes nothing and returns the stored row."""
        with create_persistence_agent(kind="postgres", dsn=db.writer_dsn) as writer:
            rows = writer.upsert("leads", [{"id": 1}])
            assert rows[0]["email"] == LEADS[0]["email"]

    def test_write_to_unknown_column_is_refused(self, db: PostgresDatabase) -> None:
        """A row naming a column the table lacks is refused, and nothing is written."""
        with create_persistence_agent(kind="postgres", dsn=db.writer_dsn) as writer:
            with pytest.raises(ColumnNotAllowedError):
                writer.batch("leads", [{"email": "a@x.io"}, {"nickname": "x"}])
            assert writer.count("leads") == len(LEADS)

    def test_upsert_on_an_unknown_conflict_column_is_refused(self, db: PostgresDatabase) -> None:
        """The backend itself refuses an ``on_conflict`` column the table lacks."""
        with create_backend(dsn=db.writer_dsn, read_only=False) as writer:
            with pytest.raises(ColumnNotAllowedError) as info:
                writer.upsert("leads", [{"email": "a@x.io"}], on_conflict="nickname")
            assert (info.value.column, info.value.operation) == ("nickname", "upsert")

    def test_writes_run_read_write_on_a_read_only_session(self, db: PostgresDatabase) -> None:
        """The agent's reads are READ ONLY too; its writes begin READ WRITE explicitly."""
        with create_persistence_agent(kind="postgres", dsn=db.writer_dsn) as writer:
            backend = writer._backend()
            assert isinstance(backend, PostgresBackend)
            assert session_state(backend)["read_only"] == "on"
            assert writer.delete("leads", [Filter("email", Op.EQ, "ann@acme.io")]) == 1


class TestConfiguration:
    def test_dsn_is_required(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """No dsn= and no RAG_POSTGRES_DSN is a ConfigurationError naming the variable."""
        monkeypatch.delenv("RAG_POSTGRES_DSN", raising=False)
        with pytest.raises(ConfigurationError) as info:
            create_read_only_facade(kind="postgres")
        assert info.value.variable == "RAG_POSTGRES_DSN"
        assert "dsn=" in str(info.value)

    def test_dsn_from_environment(
        self, db: PostgresDatabase, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """RAG_POSTGRES_DSN is used when dsn= is not given."""
        monkeypatch.setenv("RAG_POSTGRES_DSN", db.reader_dsn)
        with create_read_only_facade(kind="postgres") as facade:
            assert facade.count("leads") == len(LEADS)

    @pytest.mark.parametrize("raw", ["0", "-5", "fast", "1.5"])
    def test_bad_timeout_variable(self, raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """A RAG_STATEMENT_TIMEOUT_MS that is not a positive int names the variable."""
        monkeypatch.setenv("RAG_STATEMENT_TIMEOUT_MS", raw)
        with pytest.raises(ConfigurationError) as info:
            create_read_only_facade(kind="postgres", dsn="postgresql://127.0.0.1/x")
        assert info.value.variable == "RAG_STATEMENT_TIMEOUT_MS"

    def test_backend_hook_reads_no_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``create_backend`` itself takes explicit arguments only: the factories read settings."""
        monkeypatch.setenv("RAG_POSTGRES_DSN", "postgresql://127.0.0.1/x")
        monkeypatch.setenv("RAG_STATEMENT_TIMEOUT_MS", "fast")
        with pytest.raises(ConfigurationError, match="pass dsn= or set RAG_POSTGRES_DSN"):
            create_backend()
        create_backend(dsn="postgresql://127.0.0.1/x").close()

    def test_settings_argument_supplies_dsn_and_timeout(self, db: PostgresDatabase) -> None:
        """``settings=`` fills what the caller left out; an explicit option still wins."""
        settings = PersistenceSettings(postgres_dsn=db.reader_dsn, statement_timeout_ms=150)
        with create_read_only_facade(kind="postgres", settings=settings) as facade:
            backend = facade._backend()
            assert isinstance(backend, PostgresBackend)
            assert session_state(backend)["statement_timeout"] == "150ms"
        with create_read_only_facade(
            kind="postgres", settings=settings, statement_timeout_ms=250
        ) as facade:
            backend = facade._backend()
            assert isinstance(backend, PostgresBackend)
            assert session_state(backend)["statement_timeout"] == "250ms"
            assert facade.count("leads") == len(LEADS)

    @pytest.mark.parametrize(
        "options",
        [
            {"pool_size": 3},
            {"pool_max_size": 0},
            {"pool_min_size": 5, "pool_max_size": 2},
            {"pool_timeout": "soon"},
            {"allow_privileged": "yes"},
            {"schema": "public; drop"},
            {"statement_timeout_ms": 1.5},
        ],
        ids=str,
    )
    def test_bad_options(self, options: dict[str, Any]) -> None:
        """Unknown or ill-typed options are ConfigurationErrors, before any connection."""
        with pytest.raises(ConfigurationError):
            create_backend(dsn="postgresql://127.0.0.1/x", **options)

    def test_nothing_connects_until_first_use(self) -> None:
        """Building a backend opens no connection (the pool opens lazily)."""
        backend = create_backend(dsn="postgresql://nobody@127.0.0.1:1/none")
        assert backend._connections._pool is None
        backend.close()


class TestThreads:
    def test_one_backend_serves_many_threads(self, db: PostgresDatabase) -> None:
        """Threads sharing one facade (pool smaller than the thread count) all read correctly."""
        from concurrent.futures import ThreadPoolExecutor

        with create_read_only_facade(kind="postgres", dsn=db.reader_dsn, pool_max_size=3) as facade:

            def work(index: int) -> tuple[int, int]:
                email = LEADS[index % len(LEADS)]["email"]
                page = facade.read("leads", [Filter("email", Op.EQ, email)])
                return page.total_count, facade.count("leads")

            with ThreadPoolExecutor(max_workers=8) as executor:
                results = list(executor.map(work, range(160)))
        assert results == [(1, len(LEADS))] * 160
