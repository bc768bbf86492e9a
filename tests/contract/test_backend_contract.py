"""The behaviour every backend must share, run on each backend in ``CONTRACT_BACKENDS``."""

from __future__ import annotations

import datetime as dt
import decimal
import re

import pytest

from persistence import (
    BackendError,
    ColumnNotAllowedError,
    Filter,
    InvalidQueryError,
    Op,
    Order,
    PersistenceAgent,
    PersistenceError,
    PersistencePermissionError,
    ReadOnlyPersistenceFacade,
    TableNotAllowedError,
)
from persistence.schema import SchemaVariant
from persistence.values.types import ColumnKind, column_type
from tests.support.ids import stable_id

LEADS = [
    {"email": "ann@acme.io", "company_name": "Acme Inc.", "score": 10, "status": "new"},
    {"email": "bob@acme.io", "company_name": "ACME corp", "score": 20, "status": None},
    {"email": "cy@globex.com", "company_name": "Globex", "score": None, "status": "won"},
    {"email": "di@init.ch", "company_name": "100% Init_ech", "score": 30, "status": "new"},
    {"email": "ed@none.org", "company_name": None, "score": 20, "status": "lost"},
]


@pytest.fixture
def seeded(writer: PersistenceAgent) -> list[dict[str, object]]:
    return writer.batch("leads", LEADS)


def ids(page_rows: list[dict[str, object]]) -> list[object]:
    return [row["id"] for row in page_rows]


class TestReads:
    def test_written_rows_come_back_with_ids(
        self, seeded: list[dict[str, object]], reader: ReadOnlyPersistenceFacade
    ) -> None:
        """A batch assigns ids and the facade reads every row back in id order."""
        page = reader.read("leads")
        assert page.total_count == len(LEADS)
        assert ids(page.rows) == sorted(ids(seeded))
        by_id = sorted(seeded, key=lambda row: str(row["id"]).zfill(40))
        assert [r["email"] for r in page.rows] == [r["email"] for r in by_id]

    @pytest.mark.parametrize(
        ("flt", "expected_emails"),
        [
            (Filter("company_name", Op.ICONTAINS, "acme"), {"ann@acme.io", "bob@acme.io"}),
            (Filter("company_name", Op.ICONTAINS, "%"), {"di@init.ch"}),
            (Filter("company_name", Op.ICONTAINS, "ini_"), set()),
            (Filter("company_name", Op.ICONTAINS, "n%t"), set()),
            (Filter("company_name", Op.ICONTAINS, "INIT_"), {"di@init.ch"}),
            (Filter("company_name", Op.ILIKE, "acme%"), {"ann@acme.io", "bob@acme.io"}),
            (Filter("company_name", Op.ILIKE, "glob_x"), {"cy@globex.com"}),
            (Filter("company_name", Op.ILIKE, "100\\%%"), {"di@init.ch"}),
            (Filter("email", Op.IEQ, "ANN@Acme.IO"), {"ann@acme.io"}),
            (Filter("email", Op.IEQ, "ann@acme"), set()),
            (Filter("company_name", Op.IEQ, "acme corp"), {"bob@acme.io"}),
            (Filter("company_name", Op.IEQ, "100% INIT_ECH"), {"di@init.ch"}),
            (Filter("company_name", Op.IEQ, "100% init_e_h"), set()),
            (Filter("company_name", Op.IEQ, "100%"), set()),
            (Filter("score", Op.EQ, 20), {"bob@acme.io", "ed@none.org"}),
            (Filter("score", Op.NEQ, 20), {"ann@acme.io", "di@init.ch"}),
            (Filter("score", Op.GT, 10), {"bob@acme.io", "di@init.ch", "ed@none.org"}),
            (Filter("score", Op.GTE, 20), {"bob@acme.io", "di@init.ch", "ed@none.org"}),
            (Filter("score", Op.LT, 20), {"ann@acme.io"}),
            (Filter("score", Op.LTE, 20), {"ann@acme.io", "bob@acme.io", "ed@none.org"}),
            (Filter("score", Op.IN, [10, 30]), {"ann@acme.io", "di@init.ch"}),
            (Filter("status", Op.IS_NULL, True), {"bob@acme.io"}),
            (Filter("status", Op.NEQ, "new"), {"cy@globex.com", "ed@none.org"}),
            (Filter("company_name", Op.IS_NULL, False), {r["email"] for r in LEADS[:4]}),
        ],
        ids=lambda v: str(v) if not isinstance(v, set) else "",
    )
    def test_operator_semantics(
        self,
        seeded: object,
        reader: ReadOnlyPersistenceFacade,
        flt: Filter,
        expected_emails: set[str],
    ) -> None:
        """Each operator matches as SQL does: NULL never matches, icontains is literal."""
        page = reader.read("leads", [flt])
        assert {r["email"] for r in page.rows} == expected_emails
        assert page.total_count == len(expected_emails)
        assert reader.count("leads", [flt]) == len(expected_emails)

    def test_ieq_is_whole_value_case_insensitive_equality(
        self, writer: PersistenceAgent, reader: ReadOnlyPersistenceFacade
    ) -> None:
        """ieq folds case as PostgreSQL's lower() does and reads no character as a wildcard."""
        stored = writer.batch(
            "leads",
            [
                {"email": "A*B@X.IO"},
                {"email": "axb@x.io"},
                {"email": "a\\b@x.io"},
                {"email": "STRASSE@ΟΔΟΣ.GR"},
                {"email": "straße@x.io"},
                {"email": "İ@x.io"},
                {"email": None},
            ],
        )
        by_email = {row["email"]: row["id"] for row in stored}

        def matching(value: str) -> list[object]:
            page = reader.read("leads", [Filter("email", Op.IEQ, value)], columns=["id"])
            assert reader.count("leads", [Filter("email", Op.IEQ, value)]) == page.total_count
            return ids(page.rows)

        assert matching("a*b@x.io") == [by_email["A*B@X.IO"]]
        assert matching("A\\B@X.IO") == [by_email["a\\b@x.io"]]
        assert matching("strasse@οδοσ.gr") == [by_email["STRASSE@ΟΔΟΣ.GR"]]
        assert matching("STRASSE@ΟΔΟς.GR") == []  # final sigma is its own letter to lower()
        assert matching("STRAßE@X.IO") == [by_email["straße@x.io"]]
        assert matching("strasse@x.io") == []  # lower() keeps ß; casefold() would not
        assert matching("i@x.io") == [by_email["İ@x.io"]]

    def test_filters_are_anded(self, seeded: object, reader: ReadOnlyPersistenceFacade) -> None:
        """Several filters must all hold."""
        page = reader.read(
            "leads", [Filter("company_name", Op.ICONTAINS, "acme"), Filter("score", Op.GT, 10)]
        )
        assert [r["email"] for r in page.rows] == ["bob@acme.io"]

    def test_order_puts_nulls_last_ascending_first_descending(
        self, seeded: object, reader: ReadOnlyPersistenceFacade
    ) -> None:
        """NULLs sort last ascending and first descending; id breaks ties."""
        tied = reader.read("leads", [Filter("score", Op.EQ, 20)]).rows  # in id order
        asc = reader.read("leads", order=[Order("score")])
        assert [r["score"] for r in asc.rows] == [10, 20, 20, 30, None]
        assert asc.rows[1:3] == tied
        desc = reader.read("leads", order=[Order("score", descending=True)])
        assert [r["score"] for r in desc.rows] == [None, 30, 20, 20, 10]
        assert desc.rows[2:4] == tied

    def test_pagination_keeps_total_count(
        self, seeded: object, reader: ReadOnlyPersistenceFacade
    ) -> None:
        """limit/offset select a window; total_count counts all matches."""
        every = ids(reader.read("leads").rows)
        pages = [reader.read("leads", limit=2, offset=o) for o in (0, 2, 4, 6)]
        assert [p.total_count for p in pages] == [5, 5, 5, 5]
        assert [i for p in pages for i in ids(p.rows)] == every
        assert reader.read("leads", limit=0).rows == []

    def test_projection_returns_only_named_columns(
        self, seeded: object, reader: ReadOnlyPersistenceFacade
    ) -> None:
        """columns= narrows every row to those columns."""
        page = reader.read("leads", columns=["email", "score"], order=["email"], limit=1)
        assert page.rows == [{"email": "ann@acme.io", "score": 10}]

    def test_rows_read_are_copies(self, seeded: object, reader: ReadOnlyPersistenceFacade) -> None:
        """Mutating a returned row changes nothing stored."""
        row = reader.read("leads", order=["email"], limit=1).rows[0]
        row["email"] = "changed"
        assert reader.read("leads", order=["email"], limit=1).rows[0]["email"] == "ann@acme.io"


class TestRefusals:
    def test_unknown_column_is_refused(self, reader: ReadOnlyPersistenceFacade) -> None:
        """A column the table does not have is a ColumnNotAllowedError, not a backend error."""
        with pytest.raises(ColumnNotAllowedError) as info:
            reader.read("leads", [Filter("password", Op.EQ, "x")])
        assert info.value.column == "password"
        assert info.value.table == "leads"
        with pytest.raises(ColumnNotAllowedError):
            reader.read("leads", columns=["secret"])
        with pytest.raises(ColumnNotAllowedError):
            reader.read("leads", order=[Order("nope")])

    def test_table_outside_allow_list_is_refused(self, reader: ReadOnlyPersistenceFacade) -> None:
        """Only allow-listed tables, matched exactly."""
        for table in ("users", "LEADS", "public.leads", "pg_catalog.pg_user", "pg_shadow"):
            with pytest.raises(TableNotAllowedError):
                reader.read(table)

    @pytest.mark.parametrize(
        "method", ["write", "insert", "upsert", "update", "delete", "batch", "rpc", "execute"]
    )
    def test_write_shaped_methods_raise_and_change_nothing(
        self, seeded: object, reader: ReadOnlyPersistenceFacade, method: str
    ) -> None:
        """Every write-shaped method of the facade raises PersistencePermissionError."""
        before = reader.read("leads").rows
        with pytest.raises(PersistencePermissionError) as info:
            getattr(reader, method)("leads", {"email": "evil@x.io"})
        assert info.value.operation == method
        assert reader.read("leads").rows == before

    def test_governance_tables_are_never_written(self, writer: PersistenceAgent) -> None:
        """Even the read-write agent cannot write clients or campaigns."""
        for table in ("clients", "campaigns"):
            with pytest.raises(TableNotAllowedError):
                writer.write(table, {"name": "x"})
        assert writer.count("clients") == 0


class TestWrites:
    def test_upsert_updates_given_columns(
        self, seeded: list[dict[str, object]], writer: PersistenceAgent
    ) -> None:
        """upsert on id changes only the columns it is given."""
        first = seeded[0]
        writer.upsert("leads", {"id": first["id"], "status": "won"})
        row = writer.read("leads", [Filter("id", Op.EQ, first["id"])]).rows[0]
        assert row["status"] == "won"
        assert row["email"] == first["email"]
        assert writer.count("leads") == len(LEADS)

    def test_batch_is_all_or_nothing(
        self, seeded: list[dict[str, object]], writer: PersistenceAgent
    ) -> None:
        """A batch with a duplicate id writes nothing."""
        with pytest.raises(BackendError):
            writer.batch("leads", [{"email": "new@x.io"}, {"id": seeded[0]["id"], "email": "dup"}])
        assert writer.count("leads") == len(LEADS)
        assert writer.count("leads", [Filter("email", Op.EQ, "new@x.io")]) == 0

    def test_delete_needs_a_filter(
        self, seeded: list[dict[str, object]], writer: PersistenceAgent
    ) -> None:
        """delete removes matching rows and refuses to run unfiltered."""
        with pytest.raises(InvalidQueryError):
            writer.delete("leads", [])
        assert writer.delete("leads", [Filter("score", Op.EQ, 20)]) == 2
        assert writer.count("leads") == len(LEADS) - 2


def _uuid_keyed(schema: SchemaVariant) -> bool:
    return column_type(schema.types["leads"]["id"]).kind is ColumnKind.UUID


# Written with offsets (or as aware datetimes): a naive string written to PostgreSQL would be read
# in the server's TimeZone, which the library does not control on writes.
DATED_LEADS = [
    {"email": "feb@x.io", "created_at": "2025-02-28T23:59:59Z"},
    {"email": "mar1@x.io", "created_at": "2025-03-01T00:00:00Z"},
    {"email": "mar2@x.io", "created_at": "2025-03-01T10:00:00+02:00"},
    {"email": "mar3@x.io", "created_at": dt.datetime(2025, 3, 15, 12, tzinfo=dt.UTC)},
    # 23:30 on 31 March at UTC-01:00 is already April in UTC.
    {"email": "apr@x.io", "created_at": "2025-03-31T23:30:00-01:00"},
    {"email": "none@x.io", "created_at": None},
]


class TestTypedValues:
    def test_an_id_given_as_a_string_finds_its_row(
        self, writer: PersistenceAgent, reader: ReadOnlyPersistenceFacade, schema_variant: object
    ) -> None:
        """A key given as a str ("42", or a uuid's text in any case) is read as the key's type."""
        assert isinstance(schema_variant, SchemaVariant)
        key = "6F1C2D3E-4B5A-4C6D-8E7F-901A2B3C4D5E" if _uuid_keyed(schema_variant) else "42"
        writer.batch("leads", LEADS)
        writer.write("leads", {"id": key.lower(), "email": "keyed@x.io"})
        for given in (key, f" {key} ", key.lower()):
            page = reader.read("leads", [Filter("id", Op.EQ, given)])
            assert [r["email"] for r in page.rows] == ["keyed@x.io"]
            assert reader.count("leads", [Filter("id", Op.IN, [given])]) == 1

    @pytest.mark.parametrize(
        ("flt", "column"),
        [
            (Filter("id", Op.EQ, "not-an-id"), "id"),
            (Filter("score", Op.GTE, "high"), "score"),
            (Filter("score", Op.IN, [1, "two"]), "score"),
            (Filter("created_at", Op.LT, "last week"), "created_at"),
            (Filter("email", Op.EQ, 42), "email"),
        ],
        ids=str,
    )
    def test_an_uncoercible_value_is_a_typed_error_naming_column_and_type(
        self, seeded: object, reader: ReadOnlyPersistenceFacade, flt: Filter, column: str
    ) -> None:
        """A value that cannot be the column's type is InvalidQueryError naming both, on every
        backend, for reads, counts and check_filters alike."""
        type_name = reader.column_types("leads")[column].name
        expected = re.escape(f"leads.{column} is {type_name};")
        for attempt in (reader.read, reader.count, reader.check_filters):
            with pytest.raises(InvalidQueryError, match=expected) as info:
                attempt("leads", [flt])
            assert info.value.field == "value"

    def test_a_created_at_range_counts_alike(
        self, writer: PersistenceAgent, reader: ReadOnlyPersistenceFacade
    ) -> None:
        """A timestamptz range given as ISO strings counts the same instants on every backend."""
        writer.batch("leads", DATED_LEADS)
        march = [
            Filter("created_at", Op.GTE, "2025-03-01"),
            Filter("created_at", Op.LT, "2025-04-01T00:00:00Z"),
        ]
        assert reader.count("leads", march) == 3
        page = reader.read("leads", march, order=["email"])
        assert [r["email"] for r in page.rows] == ["mar1@x.io", "mar2@x.io", "mar3@x.io"]
        as_dates = [
            Filter("created_at", Op.GTE, dt.date(2025, 3, 1)),
            Filter("created_at", Op.LT, dt.datetime(2025, 4, 1)),  # naive: UTC
        ]
        assert reader.count("leads", as_dates) == 3

    def test_column_types_follow_the_schema(
        self, reader: ReadOnlyPersistenceFacade, schema_variant: object
    ) -> None:
        """column_types names every column of the table with the kind its DDL declares."""
        assert isinstance(schema_variant, SchemaVariant)
        declared = schema_variant.types["leads"]
        types = reader.column_types("leads")
        assert set(types) == set(declared)
        assert {c: t.kind for c, t in types.items()} == {
            c: column_type(d).kind for c, d in declared.items()
        }

    def test_check_filters_returns_the_values_a_read_sends(
        self, reader: ReadOnlyPersistenceFacade
    ) -> None:
        """check_filters coerces each value to its column's type, as a read would."""
        checked = reader.check_filters(
            "leads",
            [
                Filter("score", Op.GTE, " 10"),
                Filter("created_at", Op.LT, "2025-04-01T02:00:00+02:00"),
                Filter("email", Op.IS_NULL, False),
            ],
        )
        assert checked == (
            Filter("score", Op.GTE, 10),
            Filter("created_at", Op.LT, dt.datetime(2025, 4, 1, tzinfo=dt.UTC)),
            Filter("email", Op.IS_NULL, False),
        )


TYPED_LEADS = [
    {
        "email": "a@x.io",
        "employee_count": 120,
        "deal_value": "1500.50",
        "is_qualified": True,
        "next_follow_up": "2025-03-05",
        "last_contacted_at": "2025-03-01T09:00:00",
    },
    {
        "email": "b@x.io",
        "employee_count": "5000",
        "deal_value": decimal.Decimal("999.99"),
        "is_qualified": "false",
        "next_follow_up": dt.date(2025, 3, 10),
        "last_contacted_at": dt.datetime(2025, 3, 1, 8, 59),
    },
    {
        "email": "c@x.io",
        "employee_count": None,
        "deal_value": 20000,
        "is_qualified": None,
        "next_follow_up": None,
        "last_contacted_at": "2025-02-01 00:00:00",
    },
]


# Only the Supabase-style schema has numeric, boolean, date and timestamp columns.
@pytest.mark.parametrize("schema_variant", ["supabase_style"], indirect=True)
class TestEveryColumnType:
    @pytest.fixture
    def typed(self, writer: PersistenceAgent) -> list[dict[str, object]]:
        return writer.batch("leads", TYPED_LEADS)

    @pytest.mark.parametrize(
        ("flt", "expected"),
        [
            (Filter("employee_count", Op.IN, ["5000", 120]), {"a@x.io", "b@x.io"}),
            (Filter("employee_count", Op.LT, "1000"), {"a@x.io"}),
            (Filter("deal_value", Op.GT, "1000"), {"a@x.io", "c@x.io"}),
            (Filter("deal_value", Op.EQ, 1500.5), {"a@x.io"}),
            (Filter("deal_value", Op.LTE, decimal.Decimal("999.990")), {"b@x.io"}),
            (Filter("is_qualified", Op.EQ, "yes"), {"a@x.io"}),
            (Filter("is_qualified", Op.NEQ, True), {"b@x.io"}),
            (Filter("is_qualified", Op.IS_NULL, True), {"c@x.io"}),
            (Filter("next_follow_up", Op.LTE, "2025-03-05"), {"a@x.io"}),
            (Filter("next_follow_up", Op.EQ, dt.datetime(2025, 3, 10)), {"b@x.io"}),
            (Filter("next_follow_up", Op.GT, dt.date(2025, 3, 5)), {"b@x.io"}),
            (Filter("last_contacted_at", Op.GTE, "2025-03-01T10:00:00+01:00"), {"a@x.io"}),
            (Filter("last_contacted_at", Op.LT, "2025-03-01"), {"c@x.io"}),
            (
                Filter("last_contacted_at", Op.LT, dt.date(2025, 3, 2)),
                {"a@x.io", "b@x.io", "c@x.io"},
            ),
        ],
        ids=stable_id,
    )
    def test_each_kind_compares_as_its_type(
        self,
        typed: object,
        reader: ReadOnlyPersistenceFacade,
        flt: Filter,
        expected: set[str],
    ) -> None:
        """numeric, bigint, boolean, date and timestamp columns take strings and Python values
        alike, and answer the same rows on every backend."""
        page = reader.read("leads", [flt])
        assert {r["email"] for r in page.rows} == expected
        assert reader.count("leads", [flt]) == len(expected)

    def test_a_refused_write_writes_nothing(self, typed: object, writer: PersistenceAgent) -> None:
        """A row whose value cannot be its column's type fails the batch and writes nothing."""
        with pytest.raises(PersistenceError):
            writer.batch(
                "leads", [{"email": "ok@x.io"}, {"email": "bad@x.io", "is_qualified": "maybe"}]
            )
        assert writer.count("leads") == len(TYPED_LEADS)
