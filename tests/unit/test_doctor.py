"""The doctor's knowledge: which operator a column gets, which index serves it, what to run."""

from __future__ import annotations

import json

import pytest

from persistence.backends.postgres.catalog import RoleFacts
from persistence.backends.postgres.indexes import IndexFacts, IndexKey
from rag_agent.ops.doctor import (
    TRGM_EXTENSION,
    IndexKind,
    column_operator,
    column_operators,
    create_statement,
    format_report,
    is_required,
    memory_report,
    postgres_report,
    role_problems,
    serving_index,
    supabase_report,
    type_class,
)
from tests.support.cli import run

TEXT = ("text", "S")
TIMESTAMPTZ = ("timestamptz", "D")
BIGINT = ("int8", "N")
LEADS = {
    "id": BIGINT,
    "client_id": BIGINT,
    "email": TEXT,
    "company_name": TEXT,
    "status": TEXT,
    "score": ("int4", "N"),
    "created_at": TIMESTAMPTZ,
    "phone": TEXT,
}
READER = RoleFacts("reader", superuser=False, bypass_rls=False)


def index(
    name: str,
    *keys: tuple[str | None, str, str],
    method: str = "btree",
    table: str = "leads",
    valid: bool = True,
    partial: bool = False,
) -> IndexFacts:
    """An index as the catalog reports it; each key is (column, expression, opclass)."""
    return IndexFacts(table, name, method, tuple(IndexKey(*k) for k in keys), valid, partial)


PKEY = index("leads_pkey", ("id", "id", "int8_ops"))
LOWER_EMAIL = index("by_lower", (None, "lower(email)", "text_ops"))
TRGM_COMPANY = index("trgm", ("company_name", "company_name", "gin_trgm_ops"), method="gin")
EVERY_INDEX = (
    PKEY,
    LOWER_EMAIL,
    TRGM_COMPANY,
    index("client_then_date", ("client_id", "client_id", "int8_ops"), ("x", "x", "int8_ops")),
    index("status", ("status", "status", "text_ops")),
    index("status_lower", (None, "lower(status)", "text_ops")),
    index("created", ("created_at", "created_at", "timestamptz_ops")),
)


class TestColumnOperator:
    """Each column gets the operator the agent generates for it, by name and type."""

    @pytest.mark.parametrize(
        ("column", "kind", "operator"),
        [
            ("id", "other", "eq"),
            ("client_id", "other", "eq"),
            ("lead_id", None, "eq"),
            ("email", "text", "ieq"),
            ("work_email", "text", "ieq"),
            ("company_name", "text", "icontains"),
            ("first_name", "text", "icontains"),
            ("name", "text", "icontains"),
            ("title", "text", "icontains"),
            ("subject", "text", "icontains"),
            ("status", "text", "eq"),
            ("status", "other", "eq"),  # an enum is still compared with =
            ("channel", "text", "eq"),
            ("created_at", "temporal", "range"),
            ("signup", "temporal", "range"),
            ("created_at", None, "range"),
            ("phone", "text", None),
            ("score", "other", None),
            ("email", "other", None),  # lower() needs text
            ("body", None, None),
        ],
    )
    def test_classification(self, column: str, kind: str | None, operator: str | None) -> None:
        """The table in the module docstring, case by case."""
        assert column_operator(column, kind) == operator

    @pytest.mark.parametrize(
        ("column", "kind", "operators"),
        [
            ("title", "text", ("icontains", "ieq")),  # an acronym is asked for whole
            ("title", None, ("icontains", "ieq")),
            ("status", "text", ("eq", "ieq")),  # query_leads' status ignores case
            ("status", "enum", ("eq",)),  # ieq on an enum is a label equality
            ("stage", "text", ("eq",)),
            ("title", "enum", ("eq",)),
            ("email", "enum", ("eq",)),
            ("notes", "enum", ()),
        ],
    )
    def test_every_operator_generated_is_checked(
        self, column: str, kind: str | None, operators: tuple[str, ...]
    ) -> None:
        """A column gets a check for each operator the agent generates on it."""
        assert column_operators(column, kind) == operators

    def test_title_wants_both_indexes_on_postgresql_and_one_over_postgrest(self) -> None:
        """On PostgreSQL ieq needs lower(title) beside the trigram index; over PostgREST ieq is
        ILIKE, which the trigram index serves alone."""
        direct = postgres_report(
            schema="public",
            tables={"leads": {"title": ("text", "S")}},
            indexes=[],
            extensions={"pg_trgm"},
            role=READER,
            writable=(),
        )
        assert [(c.operator, c.index) for c in direct.checks] == [
            ("icontains", IndexKind.TRIGRAM),
            ("ieq", IndexKind.LOWER_BTREE),
        ]
        over = supabase_report("public", {"leads": ["title"]})
        assert [(c.operator, c.index) for c in over.checks] == [("icontains", IndexKind.TRIGRAM)]

    def test_an_enum_gets_a_plain_btree(self) -> None:
        """Category E is an enum: no lower() or trigram index is advised for it."""
        assert type_class("lead_status", "E") == "enum"
        report = postgres_report(
            schema="public",
            tables={"leads": {"status": ("lead_status", "E")}},
            indexes=[],
            extensions=(),
            role=READER,
            writable=(),
        )
        assert report.statements == (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS leads_status_idx ON public.leads (status);",
        )

    def test_type_classes(self) -> None:
        """Dates and timestamps are temporal; category S is text; the rest other."""
        assert type_class("timestamptz", "D") == "temporal"
        assert type_class("date", "D") == "temporal"
        assert type_class("varchar", "S") == "text"
        assert type_class("uuid", "U") == "other"
        assert type_class(None) is None


class TestServingIndex:
    """Indexes are matched by what they index, never by name."""

    def test_btree_on_the_leading_column(self) -> None:
        """A btree serves eq/range on its first key column, not on a later one."""
        assert serving_index("leads", "client_id", IndexKind.BTREE, EVERY_INDEX) == (
            "client_then_date"
        )
        assert serving_index("leads", "x", IndexKind.BTREE, EVERY_INDEX) is None

    @pytest.mark.parametrize(
        "expression", ["lower(email)", "lower((email)::text)", 'lower("email")', "lower( email )"]
    )
    def test_lower_expression_in_its_printed_forms(self, expression: str) -> None:
        """lower(email) as pg_get_indexdef prints it for text, varchar or a quoted name."""
        found = index("any_name", (None, expression, "text_ops"))
        assert serving_index("leads", "email", IndexKind.LOWER_BTREE, [found]) == "any_name"

    @pytest.mark.parametrize(
        "candidate",
        [
            index("plain", ("email", "email", "text_ops")),
            index("upper", (None, "upper(email)", "text_ops")),
            index("other_column", (None, "lower(email2)", "text_ops")),
            index("hash", (None, "lower(email)", "text_ops"), method="hash"),
            index("invalid", (None, "lower(email)", "text_ops"), valid=False),
            index("partial", (None, "lower(email)", "text_ops"), partial=True),
            index("elsewhere", (None, "lower(email)", "text_ops"), table="staging_leads"),
            index("second_key", ("id", "id", "int8_ops"), (None, "lower(email)", "text_ops")),
        ],
        ids=lambda i: i.name,
    )
    def test_what_does_not_serve_ieq(self, candidate: IndexFacts) -> None:
        """A plain, other, hash, invalid, partial, foreign or non-leading index does not."""
        assert serving_index("leads", "email", IndexKind.LOWER_BTREE, [candidate]) is None

    def test_trigram_needs_the_trigram_opclass(self) -> None:
        """GIN with gin_trgm_ops (any key) or GiST with gist_trgm_ops serve icontains."""
        two_keys = index(
            "two",
            ("title", "title", "gin_trgm_ops"),
            ("company_name", "company_name", "gin_trgm_ops"),
            method="gin",
        )
        gist = index("gist", ("company_name", "company_name", "gist_trgm_ops"), method="gist")
        plain_gin = index("gin", ("company_name", "company_name", "array_ops"), method="gin")
        btree = index("btree", ("company_name", "company_name", "text_ops"))
        assert serving_index("leads", "company_name", IndexKind.TRIGRAM, [two_keys]) == "two"
        assert serving_index("leads", "company_name", IndexKind.TRIGRAM, [gist]) == "gist"
        assert serving_index("leads", "company_name", IndexKind.TRIGRAM, [plain_gin, btree]) is None


class TestCreateStatement:
    """The statements are exact, runnable, and quote what needs quoting."""

    def test_the_three_shapes(self) -> None:
        """btree on a column, btree on lower(column), GIN with gin_trgm_ops."""
        assert create_statement("public", "leads", "client_id", IndexKind.BTREE) == (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS leads_client_id_idx "
            "ON public.leads (client_id);"
        )
        assert create_statement("public", "leads", "email", IndexKind.LOWER_BTREE) == (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS leads_email_lower_idx "
            "ON public.leads (lower(email));"
        )
        assert create_statement("public", "leads", "company_name", IndexKind.TRIGRAM) == (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS leads_company_name_trgm_idx "
            "ON public.leads USING gin (company_name gin_trgm_ops);"
        )

    def test_reserved_and_odd_names_are_quoted(self) -> None:
        """A reserved word or a name with capitals is a quoted identifier; quotes are doubled."""
        statement = create_statement("Sales", "order", 'we"ird', IndexKind.BTREE)
        assert statement == (
            'CREATE INDEX CONCURRENTLY IF NOT EXISTS "order_we""ird_idx" '
            'ON "Sales"."order" ("we""ird");'
        )

    def test_index_name_fits_postgresql(self) -> None:
        """Index names are cut to 63 characters, PostgreSQL's limit."""
        statement = create_statement("public", "t" * 40, "c" * 40, IndexKind.TRIGRAM)
        name = statement.split()[6]
        assert len(name) == 63


class TestPostgresReport:
    """The report over catalog facts: served, missing, and the statements to run."""

    def test_without_indexes_every_filtered_column_is_missing(self) -> None:
        """Only the primary key serves; the statements start with the pg_trgm extension."""
        report = postgres_report(
            schema="public",
            tables={"leads": LEADS},
            indexes=[PKEY],
            extensions={"plpgsql"},
            role=READER,
            writable=(),
        )
        served = {c.column: c.served_by for c in report.checks}
        assert served == {
            "id": "leads_pkey",
            "client_id": None,
            "email": None,
            "company_name": None,
            "status": None,
            "created_at": None,
        }
        assert report.statements[0] == TRGM_EXTENSION
        assert (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS leads_email_lower_idx "
            "ON public.leads (lower(email));"
        ) in report.statements
        # status twice: the rules' eq wants (status), query_leads' ieq wants (lower(status))
        assert len(report.statements) == 1 + 6
        assert not report.ok

    def test_with_every_index_all_is_served(self) -> None:
        """With an index for each column there is nothing to run, and the report is ok."""
        report = postgres_report(
            schema="public",
            tables={"leads": LEADS},
            indexes=EVERY_INDEX,
            extensions={"pg_trgm"},
            role=READER,
            writable=(),
        )
        assert all(check.served_by for check in report.checks)
        assert report.statements == ()
        assert report.ok
        assert "every filtered column has an index" in format_report(report)

    def test_installed_extension_is_not_created_again(self) -> None:
        """With pg_trgm installed the trigram statement comes alone."""
        report = postgres_report(
            schema="public",
            tables={"leads": {"company_name": TEXT}},
            indexes=[],
            extensions={"pg_trgm"},
            role=READER,
            writable=(),
        )
        assert report.statements == (
            create_statement("public", "leads", "company_name", IndexKind.TRIGRAM),
        )

    def test_privileges_make_it_fail_with_every_index(self) -> None:
        """A superuser, or a role that can write an allowed table, is a problem of its own."""
        report = postgres_report(
            schema="public",
            tables={"leads": LEADS},
            indexes=EVERY_INDEX,
            extensions={"pg_trgm"},
            role=RoleFacts("admin", superuser=True, bypass_rls=True),
            writable={"leads", "audit_log"},
        )
        assert not report.ok
        assert report.role == {
            "name": "admin",
            "superuser": True,
            "bypassrls": True,
            "writable_tables": ["leads"],
        }
        text = format_report(report)
        assert "problem: role admin is a superuser" in text
        assert "INSERT, UPDATE or DELETE on leads: grant SELECT only" in text

    def test_json_shape(self) -> None:
        """--json carries each column's operator, index kind, server and statement."""
        report = postgres_report(
            schema="public",
            tables={"leads": {"email": TEXT}},
            indexes=[],
            extensions=set(),
            role=READER,
            writable=(),
        )
        document = json.loads(json.dumps(report.as_json()))
        assert document["ok"] is False
        assert document["checked"] is True
        assert document["columns"] == [
            {
                "table": "leads",
                "column": "email",
                "operator": "ieq",
                "index": "btree on lower()",
                "served_by": None,
                "served": False,
                "required": True,
                "statement": document["statements"][0],
            }
        ]
        assert (document["missing_required"], document["missing_recommended"]) == (1, 0)

    def test_recommended_indexes_do_not_fail_the_check(self) -> None:
        """Point lookups (ids, e-mail) served, the broader filters not: ok, with advice that
        names the missing indexes as recommended, apart from the required ones."""
        report = postgres_report(
            schema="public",
            tables={"leads": LEADS},
            indexes=[PKEY, LOWER_EMAIL, index("client", ("client_id", "client_id", "int8_ops"))],
            extensions={"plpgsql"},
            role=READER,
            writable=(),
        )
        assert report.ok
        missing = {(c.column, c.operator) for c in report.checks if c.missing}
        assert missing == {
            ("company_name", "icontains"),
            ("status", "eq"),
            ("status", "ieq"),
            ("created_at", "range"),
        }
        assert not any(c.required for c in report.checks if c.missing)
        text = format_report(report)
        assert "4 recommended (broader filters; advice, the check does not fail):" in text
        assert "required (" not in text
        assert "missing (recommended)" in text and "MISSING" not in text
        assert report.as_json()["missing_recommended"] == 4

    def test_a_missing_required_index_fails_and_comes_first(self) -> None:
        report = postgres_report(
            schema="public",
            tables={"leads": LEADS},
            indexes=[PKEY],
            extensions={"plpgsql"},
            role=READER,
            writable=(),
        )
        assert not report.ok
        text = format_report(report)
        required = text.index("2 required (point lookups scan the table without them")
        assert required < text.index("recommended (broader filters")
        assert "leads_client_id_idx" in text[required : text.index("recommended (")]

    @pytest.mark.parametrize(
        ("column", "operator", "required"),
        [
            ("id", "eq", True),
            ("client_id", "eq", True),
            ("email", "ieq", True),
            ("billing_email", "ieq", True),
            ("status", "eq", False),
            ("status", "ieq", False),
            ("title", "ieq", False),
            ("company_name", "icontains", False),
            ("created_at", "range", False),
        ],
    )
    def test_which_are_required(self, column: str, operator: str, required: bool) -> None:
        assert is_required(column, operator) is required


class TestRoleProblems:
    """What the role may do beyond reading, in words."""

    def test_least_privilege_has_none(self) -> None:
        """NOSUPERUSER NOBYPASSRLS with SELECT only: no problem."""
        assert role_problems(READER, writable=[], allowed=["leads"]) == []

    def test_bypassrls_and_writes(self) -> None:
        """BYPASSRLS and write grants on allowed tables are named; other tables are not."""
        problems = role_problems(
            RoleFacts("app", superuser=False, bypass_rls=True),
            writable=["leads", "other"],
            allowed=["leads", "messages"],
        )
        assert problems == [
            "role app has BYPASSRLS: it bypasses row-level security",
            "the role may INSERT, UPDATE or DELETE on leads: grant SELECT only",
        ]

    def test_powerful_memberships(self) -> None:
        """A role that can become a powerful one is named with the roles it can become."""
        problems = role_problems(
            RoleFacts("app", False, False, ("pg_write_all_data",)), writable=[], allowed=["leads"]
        )
        assert problems == [
            "role app belongs to, or can SET ROLE to, pg_write_all_data: revoke the membership"
        ]


class TestOtherBackends:
    """Memory needs no index; Supabase gets advice it cannot check."""

    def test_memory(self) -> None:
        """The memory report is ok and says no index is needed."""
        report = memory_report()
        assert report.ok
        assert "no index is needed" in format_report(report)

    def test_supabase_advice(self) -> None:
        """Over PostgREST, email gets a trigram GIN index too (ieq arrives as ILIKE)."""
        report = supabase_report("public", {"leads": ["id", "email", "company_name", "created_at"]})
        assert not report.checked
        assert report.ok  # nothing could be checked, so nothing is reported missing
        assert report.statements == (
            TRGM_EXTENSION,
            create_statement("public", "leads", "email", IndexKind.TRIGRAM),
            create_statement("public", "leads", "company_name", IndexKind.TRIGRAM),
            create_statement("public", "leads", "created_at", IndexKind.BTREE),
        )
        assert [c.as_json()["served"] for c in report.checks] == [None] * 4
        assert "cannot be read over PostgREST" in format_report(report)


class TestDoctorCommand:
    """`rag-agent doctor` without a database: memory, Supabase, usage errors."""

    def test_memory_backend(self) -> None:
        """--backend memory: exit 0, JSON saying no index is needed."""
        code, out, err = run("doctor", "--backend", "memory", "--json")
        assert code == 0, err
        document = json.loads(out)
        assert document["ok"] is True
        assert document["columns"] == []

    def test_supabase_unreachable_still_advises(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """With no answer from the project, the reference schema's columns get the advice."""
        monkeypatch.setenv("SUPABASE_KEY", "test-key")
        code, out, err = run("doctor", "--backend", "supabase", "--url", "http://127.0.0.1:9")
        assert code == 0, err
        document = json.loads(out)
        assert document["checked"] is False
        assert document["statements"][0] == TRGM_EXTENSION
        assert (
            create_statement("public", "leads", "email", IndexKind.TRIGRAM)
            in (document["statements"])
        )

    def test_postgres_needs_a_dsn(self) -> None:
        """Without --dsn or RAG_POSTGRES_DSN the command is a usage error (exit 2)."""
        code, out, err = run("doctor")
        assert code == 2
        assert out == ""
        assert "RAG_POSTGRES_DSN" in err


class TestExtensionAdvice:
    """An extension the server does not ship: the advice says how to get it, not only the
    CREATE EXTENSION statement that fails there."""

    def test_absent_extensions_come_with_how_to_get_them(self) -> None:
        from persistence.search.extensions import PG_TRGM_HOWTO, PGVECTOR_HOWTO
        from rag_agent.ops.doctor_search import search_advice

        absent = search_advice(
            schema="public", tables={"leads": ["email"]}, indexes=(), extensions=set(),
            available=set(),
        )  # fmt: skip
        assert PGVECTOR_HOWTO in absent.notes and PG_TRGM_HOWTO in absent.notes
        shipped = search_advice(
            schema="public", tables={"leads": ["email"]}, indexes=(), extensions=set(),
            available={"vector", "pg_trgm"},
        )  # fmt: skip
        assert PGVECTOR_HOWTO not in shipped.notes  # CREATE EXTENSION is enough there
