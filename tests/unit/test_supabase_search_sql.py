"""The ranking function's SQL as :func:`search_function_sql` writes it for one table: the text
docs/search-supabase.md shows (installed and run on PostgreSQL 18 in
tests/integration/test_supabase_search_function.py), the library's constants, typed filters,
names checked."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persistence.admin.supabase_search_sql import search_function_sql
from persistence.backends.postgres.vectors import EF_SEARCH_FLOOR
from persistence.backends.supabase.postgrest.search import filtered_columns, ranked_columns
from persistence.errors import ConfigurationError
from persistence.search.feedback import FEEDBACK_ROWS, FEEDBACK_WEIGHT
from persistence.search.fusion import RRF_K
from persistence.search.model import LEG_DEPTH, TIER_DEPTH, TIER_ROWS
from rag_agent.cli.app import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "search-supabase.md"


def _comment(sql: str) -> str:
    found = re.search(r"E'(.*)';", sql)
    assert found is not None
    return found.group(1).replace("\\n", "\n")


class TestSearchFunctionSql:
    def test_the_documented_template_is_the_generated_one(self) -> None:
        """The docs show exactly what the command prints for ``inquiries`` (regenerate them
        when the library's ranking constants change)."""
        found = re.search(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
        assert found is not None
        generated = search_function_sql(
            "inquiries", ["subject", "body"], filters={"client_id": "uuid"}
        )
        assert found.group(1) == generated

    def test_ranks_with_the_library_constants(self) -> None:
        sql = search_function_sql("inquiries", ["subject", "body"])
        assert f"depth int := {TIER_DEPTH};" in sql
        assert f"depth := {LEG_DEPTH};" in sql
        assert f"where o.position <= {TIER_ROWS};" in sql
        assert f"greatest(depth, {EF_SEARCH_FLOOR})" in sql
        assert f"limit {FEEDBACK_ROWS}\n" in sql
        assert f"{FEEDBACK_WEIGHT!r}::float8 * mean.m" in sql
        assert sql.count(f"({RRF_K} + x.") == 6  # three legs, in each tier

    def test_each_filter_is_a_typed_predicate_in_every_read(self) -> None:
        """One predicate per filterable column in every read of the table: the feedback step
        (its count deciding the pooled path, its count of the filtered rows, its exact and its
        HNSW scan), the three legs of each
        tier (the semantic leg's exact and HNSW scans, each with the count it falls back on), the
        filler and the count; no ``to_jsonb`` containment left."""
        sql = search_function_sql(
            "tickets", ["title", "body"], filters={"client_id": "bigint", "status": "text"}
        )
        for column, kind in (("client_id", "bigint"), ("status", "text")):
            predicate = (
                f"(filters->'{column}' is null or t.{column} = (filters->>'{column}')::{kind})"
            )
            assert sql.count(predicate) == 4 + 2 * (2 + 2 * 2) + 2
        assert "to_jsonb" not in sql
        assert "array['client_id', 'status']::text[]" in sql
        assert "set plan_cache_mode = force_custom_plan" in sql

    def test_the_comment_says_what_it_ranks_and_filters_by(self) -> None:
        comment = _comment(search_function_sql("tickets", ["title"], filters={"owner": "uuid"}))
        assert ranked_columns(comment) == ("title",)
        assert filtered_columns(comment) == ("owner",)
        unfiltered = _comment(search_function_sql("tickets", ["title"]))
        assert filtered_columns(unfiltered) == ()

    def test_without_a_short_column_the_trigram_leg_ranks_nothing(self) -> None:
        sql = search_function_sql("notes", ["body"], id_type="bigint")
        assert "select null::bigint as id, null::int as r where false" in sql
        assert "<%" not in sql

    def test_an_old_comment_names_no_filters(self) -> None:
        """The first template's comment has no ``filters``: any column, as before."""
        assert filtered_columns('Ranked\n{"columns": ["subject", "body"]}') is None

    @pytest.mark.parametrize(
        ("table", "columns", "filters", "id_type"),
        [
            ("Inquiries", ["subject"], {}, "uuid"),
            ("inquiries; drop table x", ["subject"], {}, "uuid"),
            ("inquiries", [], {}, "uuid"),
            ("inquiries", ['subject"'], {}, "uuid"),
            ("inquiries", ["subject"], {"client_id": "uuid; select 1"}, "uuid"),
            ("inquiries", ["subject"], {"client id": "uuid"}, "uuid"),
            ("inquiries", ["subject"], {}, "uuid)"),
        ],
    )
    def test_bad_names_and_types_are_refused(
        self, table: str, columns: list[str], filters: dict[str, str], id_type: str
    ) -> None:
        with pytest.raises(ConfigurationError):
            search_function_sql(table, columns, filters=filters, id_type=id_type)

    @given(st.text(max_size=30))
    def test_any_name_is_refused_or_a_plain_identifier(self, name: str) -> None:
        """Nothing but lower-case letters, digits and underscores reaches the SQL."""
        try:
            sql = search_function_sql(name, ["subject"], filters={name: "text"})
        except ConfigurationError:
            return
        assert re.fullmatch(r"[a-z_][a-z0-9_]*", name)
        assert f"search_{name}(" in sql


class TestSearchFunctionCommand:
    def test_prints_the_generated_sql(self) -> None:
        """``rag-agent search-function`` prints what :func:`search_function_sql` writes."""
        out, err = io.StringIO(), io.StringIO()
        argv = ["search-function", "inquiries", "--columns", "subject, body"]
        code = main([*argv, "--filter", "client_id:uuid"], stdout=out, stderr=err)
        assert code == 0, err.getvalue()
        assert out.getvalue() == search_function_sql(
            "inquiries", ["subject", "body"], filters={"client_id": "uuid"}
        )

    @pytest.mark.parametrize(
        "extra", [["--filter", "client_id"], ["--filter", "client_id:uuid;"], ["--schema", "A"]]
    )
    def test_bad_options_are_usage_errors(self, extra: list[str]) -> None:
        """A malformed ``--filter`` or name is exit 2 and prints no SQL."""
        out, err = io.StringIO(), io.StringIO()
        code = main(
            ["search-function", "inquiries", "--columns", "subject", *extra], stdout=out, stderr=err
        )
        assert code == 2 and out.getvalue() == ""

    def test_columns_naming_no_column_is_a_usage_error(self) -> None:
        """``--columns ,`` names nothing: exit 2, the reason on stderr, no SQL."""
        out, err = io.StringIO(), io.StringIO()
        code = main(["search-function", "inquiries", "--columns", " , "], stdout=out, stderr=err)
        assert code == 2 and out.getvalue() == ""
        assert "--columns names no column" in err.getvalue()
