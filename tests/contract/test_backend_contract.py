"""The behaviour every backend must share, run on each backend in ``CONTRACT_BACKENDS``."""

from __future__ import annotations

import pytest

from persistence import (
    BackendError,
    ColumnNotAllowedError,
    Filter,
    InvalidQueryError,
    Op,
    Order,
    PersistenceAgent,
    PersistencePermissionError,
    ReadOnlyPersistenceFacade,
    TableNotAllowedError,
)

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
