"""The bundled sample dataset: deterministic, shipped in sync, shaped for the demo, loadable."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest

from persistence import (
    BUSINESS_TABLES,
    ConfigurationError,
    Filter,
    MemoryStore,
    Op,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.backends.memory import MemoryBackend
from persistence.schema import TABLE_COLUMNS
from rag_agent.ops.sample import (
    ACME_COMPANIES,
    LARGE_COMPANY,
    SAMPLE_TABLES,
    load_sample,
    sample_rows,
)
from scripts.generate_sample import _encode, generate_sample, write_sample_files


@pytest.fixture(scope="module")
def generated() -> dict[str, list[dict[str, object]]]:
    return generate_sample()


class TestGenerateSample:
    """`generate_sample` yields the same realistic dataset every time."""

    def test_deterministic(self, generated: dict[str, list[dict[str, object]]]) -> None:
        """Two runs with the default seed produce identical rows."""
        assert generate_sample() == generated

    def test_seed_changes_the_data(self, generated: dict[str, list[dict[str, object]]]) -> None:
        """Another seed produces other leads (the seed is really used)."""
        assert generate_sample(seed=1)["leads"] != generated["leads"]

    def test_covers_every_business_table(
        self, generated: dict[str, list[dict[str, object]]]
    ) -> None:
        """Every business table has rows, with exactly the reference schema's columns."""
        assert set(generated) == set(BUSINESS_TABLES) == set(SAMPLE_TABLES)
        for table, rows in generated.items():
            assert rows, table
            for row in rows:
                assert tuple(row) == TABLE_COLUMNS[table]

    def test_a_few_thousand_leads_with_unique_ids_and_emails(
        self, generated: dict[str, list[dict[str, object]]]
    ) -> None:
        """Leads number in the thousands; ids run 1..n and e-mail addresses never repeat."""
        leads = generated["leads"]
        assert 2000 <= len(leads) <= 5000
        assert [r["id"] for r in leads] == list(range(1, len(leads) + 1))
        emails = [r["email"] for r in leads]
        assert len(set(emails)) == len(emails)

    def test_only_reserved_domains_and_fictional_phones(
        self, generated: dict[str, list[dict[str, object]]]
    ) -> None:
        """No real person can be mailed or called: `.example` domains, 555-01xx numbers."""
        for row in generated["leads"] + generated["staging_leads"]:
            if row["email"] is not None:
                assert str(row["email"]).endswith(".example")
        for row in generated["leads"]:
            if row["phone"] is not None:
                assert "-555-01" in str(row["phone"])

    def test_acme_companies_for_reformulation(
        self, generated: dict[str, list[dict[str, object]]]
    ) -> None:
        """Several "Acme …" companies with legal suffixes have leads, and none is "Acme Corp"."""
        companies = Counter(str(r["company_name"]) for r in generated["leads"])
        acme = {name: n for name, n in companies.items() if "acme" in name.lower()}
        assert set(acme) == set(ACME_COMPANIES)
        assert {"Acme Inc.", "Acme GmbH", "Acme Holdings Ltd"} <= set(acme)
        assert all(n >= 10 for n in acme.values())
        assert not any(name.lower().startswith("acme corp") for name in companies)

    def test_large_company_exceeds_summary_threshold(
        self, generated: dict[str, list[dict[str, object]]]
    ) -> None:
        """One company has more leads than the default summary threshold of 200."""
        count = sum(1 for r in generated["leads"] if r["company_name"] == LARGE_COMPANY)
        assert count > 200

    def test_references_resolve(self, generated: dict[str, list[dict[str, object]]]) -> None:
        """Every foreign key points at an existing row."""
        ids = {table: {r["id"] for r in rows} for table, rows in generated.items()}
        for row in generated["campaigns"]:
            assert row["client_id"] in ids["clients"]
        for row in generated["sequences"]:
            assert row["campaign_id"] in ids["campaigns"]
        for row in generated["leads"]:
            assert row["client_id"] in ids["clients"]
            assert row["campaign_id"] is None or row["campaign_id"] in ids["campaigns"]
        for row in generated["conversations"]:
            assert row["lead_id"] in ids["leads"]
        for row in generated["messages"]:
            assert row["conversation_id"] in ids["conversations"]
        for row in generated["inquiries"]:
            assert row["lead_id"] in ids["leads"]

    def test_has_realistic_gaps(self, generated: dict[str, list[dict[str, object]]]) -> None:
        """Some phones, titles and scores are missing, as in real CRM data."""
        for column in ("phone", "title", "score"):
            assert any(r[column] is None for r in generated["leads"]), column


class TestShippedFiles:
    """The package data equals the generator's output and stays small."""

    @pytest.mark.parametrize("table", SAMPLE_TABLES)
    def test_in_sync_with_generator(
        self, table: str, generated: dict[str, list[dict[str, object]]]
    ) -> None:
        """Each shipped file is byte-for-byte what the generator writes (regenerate if not)."""
        shipped = resources.files("rag_agent").joinpath("data", f"{table}.json")
        assert shipped.read_text("utf-8") == _encode(table, generated[table]), (
            "regenerate with: python -m rag_agent.ops.sample rag_agent/data"
        )

    def test_small(self) -> None:
        """All data files together stay well under 2 MB."""
        data = resources.files("rag_agent").joinpath("data")
        total = sum(len(f.read_bytes()) for f in data.iterdir() if f.name.endswith(".json"))
        assert total < 2_000_000

    def test_write_sample_files(self, tmp_path: Path) -> None:
        """`write_sample_files` writes one file per table and names them."""
        names = write_sample_files(tmp_path)
        assert sorted(names) == sorted(f"{t}.json" for t in SAMPLE_TABLES)
        assert all((tmp_path / n).stat().st_size > 0 for n in names)


class TestSampleRows:
    """`sample_rows` reads one table of the shipped data."""

    def test_timestamps_are_aware_datetimes(self) -> None:
        """Timestamp columns come back as timezone-aware datetimes, other values as stored."""
        row = sample_rows("leads")[0]
        assert isinstance(row["created_at"], dt.datetime)
        assert row["created_at"].tzinfo is not None
        assert isinstance(row["id"], int)

    def test_unknown_table(self) -> None:
        """A table without sample data raises ConfigurationError naming the known tables."""
        with pytest.raises(ConfigurationError, match="leads"):
            sample_rows("users")


class TestLoadSample:
    """`load_sample` loads into a store, a backend or a PersistenceAgent, idempotently."""

    def test_into_store(self, store: MemoryStore) -> None:
        """Every table is loaded and readable through a read-only facade."""
        counts = load_sample(store)
        assert set(counts) == set(SAMPLE_TABLES)
        facade = create_read_only_facade(kind="memory", store=store)
        for table, n in counts.items():
            assert facade.count(table) == n
        acme = facade.count("leads", [Filter("company_name", Op.ICONTAINS, "acme")])
        assert acme > 100

    def test_idempotent(self, store: MemoryStore) -> None:
        """Loading twice leaves one copy of every row."""
        first = load_sample(store)
        assert load_sample(store) == first
        facade = create_read_only_facade(kind="memory", store=store)
        assert facade.count("leads") == first["leads"]

    def test_into_backend(self, store: MemoryStore) -> None:
        """A backend takes every table, the governance tables included."""
        counts = load_sample(MemoryBackend(store), tables=["clients", "leads"])
        assert counts == {
            "clients": len(sample_rows("clients")),
            "leads": len(sample_rows("leads")),
        }

    def test_agent_skips_governance_tables(self, store: MemoryStore) -> None:
        """A PersistenceAgent never writes clients or campaigns: they are skipped."""
        agent = create_persistence_agent(kind="memory", store=store)
        counts = load_sample(agent)
        assert "clients" not in counts and "campaigns" not in counts
        assert counts["leads"] == len(sample_rows("leads"))
        assert store.rows("clients") == []

    def test_selected_tables_load_in_reference_order(self, store: MemoryStore) -> None:
        """Only the requested tables are loaded, in dependency order."""
        counts = load_sample(store, tables=["leads", "clients"])
        assert list(counts) == ["clients", "leads"]

    def test_unknown_table(self, store: MemoryStore) -> None:
        """An unknown table name is refused before anything is written."""
        with pytest.raises(ConfigurationError, match="users"):
            load_sample(store, tables=["leads", "users"])
        assert store.rows("leads") == []

    def test_bad_batch_size(self, store: MemoryStore) -> None:
        """A batch size below 1 is a configuration error."""
        with pytest.raises(ConfigurationError, match="batch_size"):
            load_sample(store, batch_size=0)

    def test_bad_target(self) -> None:
        """Something that cannot store rows is refused with a clear message."""
        with pytest.raises(ConfigurationError, match="MemoryStore"):
            load_sample(object(), tables=["clients"])  # type: ignore[arg-type]
