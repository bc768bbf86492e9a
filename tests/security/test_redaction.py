"""PII redaction in the facade, and the provenance a holder of the original can still verify."""

from __future__ import annotations

import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from persistence import (
    AccessPolicy,
    ColumnNotAllowedError,
    ConfigurationError,
    Filter,
    MemoryBackend,
    MemoryStore,
    Op,
    Order,
    PersistenceSettings,
    ReadOnlyPersistenceFacade,
    RedactedRow,
    RedactionPolicy,
    create_read_only_facade,
)
from persistence.search import SearchHit, SearchRequest, SearchResult
from rag_agent import RAGAgent, RAGSettings, build_tools
from rag_agent.envelope import OUTSIDE_ROW, Envelope, Record, row_hash, schema_json
from rag_agent.untrusted import unwrap_boundary

KEY = "a test redaction key of some length"
LEAD = {
    "id": 1,
    "client_id": 1,
    "email": "jane.doe@acme.io",
    "first_name": "Jane",
    "last_name": "Doe",
    "phone": "+1 555 0167",
    "company_name": "Acme",
    "status": "new",
}
RULES = {
    "*": {"email": "mask:email"},
    "leads": {
        "phone": "mask:phone",
        "first_name": "mask:initials",
        "last_name": "hash",
        "title": "drop",
    },
}


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore()
    store.insert("clients", [{"id": 1, "name": "Acme"}])
    store.insert("leads", [{**LEAD, "title": "CTO"}, {**LEAD, "id": 2, "email": "bo@acme.io"}])
    store.insert("conversations", [{"id": 5, "lead_id": 1, "channel": "email"}])
    return store


def policy(lookups: Any = "hash") -> RedactionPolicy:
    rules = {t: c for t, c in RULES.items() if t != "*"}
    return RedactionPolicy(rules, default=RULES["*"], key=KEY, lookups=lookups)


class _SearchingMemory(MemoryBackend):
    """The memory backend with a stand-in search leg: every matching row, in id order; it
    remembers the text columns the facade let it rank by."""

    ranked_by: tuple[str, ...] = ()

    def search(
        self, query: Any, request: SearchRequest, text_columns: tuple[str, ...], embedder: Any
    ) -> SearchResult:
        self.ranked_by = text_columns
        page = self.read(query)
        hits = tuple(SearchHit(row=row, score=1.0) for row in page.rows[: request.k])
        return SearchResult(hits, request.mode, ("keyword",), request.text, page.total_count)


def facade_over(store: MemoryStore, **options: Any) -> Any:
    options.setdefault("redaction", policy())
    return create_read_only_facade("memory", store=store, **options)


def fields_of(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in OUTSIDE_ROW}


class TestFacade:
    def test_rows_leave_redacted(self, store: MemoryStore) -> None:
        """Masked, hashed and dropped columns never leave the facade as they are stored."""
        row = facade_over(store).read("leads", [Filter("id", Op.EQ, 1)]).rows[0]
        assert isinstance(row, RedactedRow)
        assert row["email"] == "j***@acme.io"
        assert row["phone"] == "***67"
        assert row["first_name"] == "J."
        assert row["last_name"].startswith("hash:") and "Doe" not in row["last_name"]
        assert "title" not in row
        assert row["company_name"] == "Acme"  # not named by a rule
        assert {c: f.method for c, f in row.redaction.fields.items()} == {
            "email": "mask",
            "phone": "mask",
            "first_name": "mask",
            "last_name": "hash",
            "title": "drop",
        }

    def test_pseudonyms_are_stable_and_keyed(self, store: MemoryStore) -> None:
        """One key: the same value, the same pseudonym; another key: another pseudonym."""
        first = facade_over(store).read("leads", order=["id"]).rows
        assert first[0]["last_name"] == first[1]["last_name"]
        other = RedactionPolicy({"leads": {"last_name": "hash"}}, key="another key, 16+ bytes")
        again = facade_over(store, redaction=other).read("leads", order=["id"]).rows
        assert again[0]["last_name"] != first[0]["last_name"]

    def test_related_rows_follow_their_own_table(self, store: MemoryStore) -> None:
        """Children are redacted by their table's rules; a parent's rules do not leak to them."""
        redaction = RedactionPolicy({"conversations": {"channel": "mask"}}, key=KEY)
        page = facade_over(store, redaction=redaction).read(
            "leads", [Filter("id", Op.EQ, 1)], include=["conversations"]
        )
        child = page.rows[0]["conversations"][0]
        assert child["channel"] == "***"
        assert page.rows[0]["email"] == "jane.doe@acme.io"

    def test_search_rows_are_redacted_and_not_ranked_by_redacted_text(
        self, store: MemoryStore
    ) -> None:
        """Search hands out redacted rows and does not rank by a redacted column."""
        backend = _SearchingMemory(store=store)
        facade = ReadOnlyPersistenceFacade(backend, AccessPolicy.read_only(), redaction=policy())
        result = facade.search("leads", "acme", k=5)
        assert {row["email"] for row in result.rows} == {"j***@acme.io", "b***@acme.io"}
        assert all("title" not in row for row in result.rows)
        assert backend.ranked_by and not {"email", "phone", "first_name", "last_name", "title"} & (
            set(backend.ranked_by)
        )
        assert "company_name" in backend.ranked_by

    @pytest.mark.parametrize(
        "flt",
        [
            Filter("email", Op.ICONTAINS, "jane"),
            Filter("email", Op.ILIKE, "j%"),
            Filter("phone", Op.GT, "+1 555"),
            Filter("title", Op.LT, "D"),
        ],
    )
    def test_probing_filters_refused(self, store: MemoryStore, flt: Filter) -> None:
        """Substring and range filters on a redacted column would spell its value out: refused."""
        facade = facade_over(store)
        with pytest.raises(ColumnNotAllowedError, match="redacted"):
            facade.read("leads", [flt])
        with pytest.raises(ColumnNotAllowedError, match="redacted"):
            facade.count("leads", [flt])
        with pytest.raises(ColumnNotAllowedError, match="redacted"):
            facade.check_filters("leads", [flt])

    def test_exact_lookups_with_lookups_all(self, store: MemoryStore) -> None:
        """With lookups="all" a caller may look a known value up in any redacted column; the
        answer still shows it redacted."""
        facade = facade_over(store, redaction=policy("all"))
        rows = facade.read("leads", [Filter("email", Op.IEQ, "JANE.DOE@acme.io")]).rows
        assert [r["id"] for r in rows] == [1]
        assert rows[0]["email"] == "j***@acme.io"
        assert facade.count("leads", [Filter("title", Op.EQ, "CTO")]) == 1

    @pytest.mark.parametrize(
        "flt",
        [
            Filter("email", Op.IEQ, "jane.doe@acme.io"),  # mask:email
            Filter("phone", Op.EQ, "+1 555 0167"),  # mask:phone
            Filter("phone", Op.IN, ("+1 555 0167", "+1 555 0168")),
            Filter("title", Op.EQ, "CTO"),  # drop
            Filter("first_name", Op.IS_NULL, False),  # mask:initials
        ],
    )
    def test_masked_and_dropped_columns_answer_no_filter(
        self, store: MemoryStore, flt: Filter
    ) -> None:
        """By default a mask or drop column refuses even exact look-ups: exact filters and
        counts would be an oracle for the value (a phone number fell in seven calls)."""
        facade = facade_over(store)
        for call in (facade.read, facade.count, facade.check_filters):
            with pytest.raises(ColumnNotAllowedError, match="RAG_REDACT_LOOKUPS"):
                call("leads", [flt])

    def test_hash_columns_answer_exact_lookups_unless_none(self, store: MemoryStore) -> None:
        """A hash column answers exact look-ups by default (documented: its pseudonyms already
        tell equal values apart); lookups="none" refuses them too."""
        assert facade_over(store).count("leads", [Filter("last_name", Op.EQ, "Doe")]) == 2
        strict = facade_over(store, redaction=policy("none"))
        with pytest.raises(ColumnNotAllowedError, match="lookups='none'"):
            strict.count("leads", [Filter("last_name", Op.EQ, "Doe")])
        assert strict.count("leads", [Filter("status", Op.EQ, "new")]) == 2  # not redacted

    def test_lookups_setting(self, store: MemoryStore) -> None:
        """RAG_REDACT_LOOKUPS reaches the policy; a bad value names the variable."""
        env = {"RAG_REDACT": "*.email=mask:email", "RAG_REDACTION_KEY": KEY}
        facade = create_read_only_facade(
            "memory",
            store=store,
            settings=PersistenceSettings.from_env({**env, "RAG_REDACT_LOOKUPS": "all"}),
        )
        assert facade.count("leads", [Filter("email", Op.EQ, LEAD["email"])]) == 1
        with pytest.raises(ConfigurationError, match="RAG_REDACT_LOOKUPS"):
            PersistenceSettings.from_env({**env, "RAG_REDACT_LOOKUPS": "some"})

    def test_ordering_grouping_and_revealing_metrics_refused(self, store: MemoryStore) -> None:
        """Order, group keys and min/max/sum/avg would hand the values out; count_distinct not."""
        facade = facade_over(store)
        with pytest.raises(ColumnNotAllowedError, match="ordering"):
            facade.read("leads", order=[Order("email")])
        with pytest.raises(ColumnNotAllowedError, match="grouping"):
            facade.aggregate("leads", group_by=["email"])
        with pytest.raises(ColumnNotAllowedError, match="'min'"):
            facade.aggregate("leads", metrics=["min:email"])
        result = facade.aggregate("leads", metrics=["count_distinct:email"])
        assert result.groups[0].metrics["count_distinct:email"] == 2

    def test_composes_with_default_deny_columns(self, store: MemoryStore) -> None:
        """A denied column stays denied (refused, never redacted into view); an allowed,
        redacted one comes out redacted; a rule for a denied column reveals nothing."""
        facade = facade_over(
            store, columns={"leads": {"id", "email", "status"}}, default_columns={"id"}
        )
        row = facade.read("leads", [Filter("id", Op.EQ, 1)]).rows[0]
        assert dict(row) == {"id": 1, "email": "j***@acme.io", "status": "new"}
        assert set(row.redaction.fields) == {"email"}
        assert dict(facade.redacted_columns("leads")) == {"email": "mask:email"}
        with pytest.raises(ColumnNotAllowedError, match="not allowed by the access policy"):
            facade.read("leads", [Filter("phone", Op.EQ, "+1 555 0167")])
        assert facade.read("clients").rows == [{"id": 1}]

    def test_no_policy_no_change(self, store: MemoryStore) -> None:
        """Without redaction rows are plain dicts, as before."""
        row = create_read_only_facade("memory", store=store).read("leads", order=["id"]).rows[0]
        assert type(row) is dict and row["email"] == "jane.doe@acme.io"


class TestConfiguration:
    def test_settings_supply_the_policy(self, store: MemoryStore) -> None:
        """``RAG_REDACT``/``RAG_REDACTION_KEY`` through settings; the key is a secret."""
        settings = PersistenceSettings.from_env(
            {"RAG_REDACT": "*.email=mask:email, leads.phone=drop", "RAG_REDACTION_KEY": KEY}
        )
        assert KEY not in repr(settings)
        facade = create_read_only_facade("memory", store=store, settings=settings)
        row = facade.read("leads", [Filter("id", Op.EQ, 1)]).rows[0]
        assert row["email"] == "j***@acme.io" and "phone" not in row
        assert facade.redaction is not None and not facade.redaction.ephemeral_key
        same = policy().redact_row("leads", {"id": 1, "email": LEAD["email"]})
        assert row.redaction.fields["email"].commitment == same.redaction.fields["email"].commitment

    def test_explicit_mapping_wins_over_settings(self, store: MemoryStore) -> None:
        settings = PersistenceSettings.from_env({"RAG_REDACT": "*.email=drop"})
        facade = create_read_only_facade(
            "memory", store=store, settings=settings, redaction={"*": {"email": "hash"}}
        )
        assert facade.read("leads", order=["id"]).rows[0]["email"].startswith("hash:")

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("leads.email", "table.column=spec"),
            ("email=mask", "table.column=spec"),
            ("leads.email=scramble", "unknown redaction"),
            ("lea ds.email=mask", "not an identifier"),
        ],
    )
    def test_bad_rules_are_configuration_errors(
        self, store: MemoryStore, text: str, message: str
    ) -> None:
        settings = PersistenceSettings.from_env({"RAG_REDACT": text})
        with pytest.raises(ConfigurationError, match=message):
            create_read_only_facade("memory", store=store, settings=settings)

    def test_short_key_refused(self) -> None:
        with pytest.raises(ConfigurationError, match="16 bytes") as info:
            RedactionPolicy({"leads": {"email": "mask"}}, key="short")
        assert info.value.variable == "RAG_REDACTION_KEY"

    def test_ephemeral_key_warns_once(self, store: MemoryStore) -> None:
        """Without a key, pseudonyms hold for the process only, and the logs say so."""
        import persistence.redaction as module

        module._warned.clear()
        facade = create_read_only_facade(
            "memory", store=store, redaction={"leads": {"email": "hash"}}
        )
        with capture_logs() as logs:
            facade.read("leads")
            facade.read("leads")
        events = [e["event"] for e in logs if e["log_level"] == "warning"]
        assert events == ["persistence.redaction.ephemeral_key"]


class TestEnvelope:
    def agent(self, store: MemoryStore, lookups: Any = "hash") -> RAGAgent:
        facade = facade_over(store, redaction=policy(lookups))
        return RAGAgent(facade, settings=RAGSettings(), llm=None)

    def test_envelope_marks_redaction_and_still_verifies(self, store: MemoryStore) -> None:
        """row_hash verifies over the record as shown; source_hash and every commitment verify
        for the original row and fail for a tampered one."""
        envelope = self.agent(store).read("leads", [Filter("id", Op.EQ, 1)], return_json=True)
        assert isinstance(envelope, dict)
        record = json.loads(json.dumps(envelope))["records"][0]
        provenance = record["provenance"]
        fields = fields_of(record)
        assert row_hash(fields) == provenance["row_hash"]
        assert provenance["redacted"]["email"] == {
            "method": "mask",
            "style": "email",
            "commitment": provenance["redacted"]["email"]["commitment"],
        }
        assert provenance["redacted"]["title"]["method"] == "drop"
        # What a holder of the data has: the row as stored, read without redaction.
        holder = create_read_only_facade("memory", store=store)
        original = holder.read("leads", [Filter("id", Op.EQ, 1)]).rows[0]
        check = policy()
        assert check.verify("leads", original, fields, provenance["source_hash"])
        assert check.verify(
            "leads", original, fields, provenance["source_hash"], provenance["redacted"]
        )
        assert check.verify_field(
            "leads", 1, "email", LEAD["email"], provenance["redacted"]["email"]["commitment"]
        )
        tampered = {**original, "email": "john@acme.io"}
        assert not check.verify("leads", tampered, fields, provenance["source_hash"])
        assert not check.verify_field(
            "leads", 1, "email", "john@acme.io", provenance["redacted"]["email"]["commitment"]
        )
        dropped = {**original, "title": "CEO"}
        assert not check.verify("leads", dropped, fields, provenance["source_hash"])

    def test_records_equal_validated_models(self, store: MemoryStore) -> None:
        """Redacted records, built without validation, equal validated models of their data."""
        envelope = self.agent(store).read("leads", order=["id"])
        assert isinstance(envelope, Envelope)
        for record in envelope.records:
            validated = Record.model_validate(record.model_dump())
            assert validated == record
            assert validated.model_dump(mode="json") == record.model_dump(mode="json")
            assert record.provenance.model_fields_set == validated.provenance.model_fields_set

    def test_cached_records_are_not_shared_mutably(self, store: MemoryStore) -> None:
        """Changing one envelope's redaction notes does not change what a cache hit returns."""
        agent = self.agent(store)
        first = agent.read("leads", [Filter("id", Op.EQ, 1)])
        assert isinstance(first, Envelope)
        notes = first.records[0].provenance.redacted
        assert notes is not None
        notes.clear()
        again = agent.read("leads", [Filter("id", Op.EQ, 1)])
        assert isinstance(again, Envelope) and again.metadata.cache == "hit"
        assert again.records[0].provenance.redacted

    def test_raw_row_is_redacted_too(self, store: MemoryStore) -> None:
        """``include_raw`` shows the row as it left the facade, never the stored value."""
        envelope = self.agent(store).read("leads", [Filter("id", Op.EQ, 1)], include_raw=True)
        assert isinstance(envelope, Envelope)
        text = json.dumps(envelope.to_json())
        for secret in ("jane.doe@acme.io", "0167", "Doe", "CTO"):
            assert secret not in text

    def test_unredacted_envelopes_unchanged(self, store: MemoryStore) -> None:
        """Without redaction provenance has neither key."""
        agent = RAGAgent(create_read_only_facade("memory", store=store), settings=RAGSettings())
        envelope = agent.read("leads", [Filter("id", Op.EQ, 1)], return_json=True)
        assert isinstance(envelope, dict)
        assert set(envelope["records"][0]["provenance"]) == {
            "source",
            "row_id",
            "row_hash",
            "retrieved_at",
        }

    def test_tools_never_show_the_raw_value(self, store: MemoryStore) -> None:
        """Every data tool's output (what a model reads) holds redacted values only, beyond the
        caller's own filter values echoed in the metadata (with every redacted column
        answering exact look-ups, so that the look-ups find rows)."""
        tools = {t.name: t for t in build_tools(self.agent(store, lookups="all"))}
        calls = {
            "query_leads": {"email": "jane.doe@acme.io"},
            "query_table": {"table": "leads", "filters": {"id": 1}, "include": ["conversations"]},
            "rag_agent": {"query": "lead jane.doe@acme.io"},
            "describe_table": {"table": "leads", "sample_rows": 2},
        }
        for name, arguments in calls.items():
            if name not in tools:
                continue
            text = tools[name].invoke(arguments)
            payload = json.loads(unwrap_boundary(text))
            # "applied" echoes the caller's own values: what came from the data is the rest.
            payload.pop("applied", None)
            body = json.dumps(payload, ensure_ascii=False)
            assert payload.get("rows") or payload.get("columns"), (name, body[:400])
            for secret in ("jane.doe@acme.io", "+1 555 0167", '"Doe"', "CTO"):
                assert secret not in body, (name, secret, body[:400])

    def test_describe_table_says_what_is_redacted(self, store: MemoryStore) -> None:
        """describe_table marks redacted columns and offers exact look-ups only on the hashed
        ones, none on masked ones."""
        tools = {t.name: t for t in build_tools(self.agent(store))}
        described = json.loads(tools["describe_table"].invoke({"table": "leads"}))
        columns = {c["name"]: c for c in described["columns"]}
        assert columns["email"]["redacted"] == "mask:email"
        assert columns["email"]["operators"] == []  # a masked column answers no filter
        assert columns["last_name"]["redacted"] == "hash"
        assert "icontains" not in columns["last_name"]["operators"]
        assert "eq" in columns["last_name"]["operators"]
        assert "redacted" not in columns["company_name"]
        assert "icontains" in columns["company_name"]["operators"]

    def test_rules_probing_a_redacted_column_are_ignored_not_fatal(
        self, store: MemoryStore
    ) -> None:
        """A condition the redaction refuses is reported in ``ignored``; the run answers."""
        agent = RAGAgent(
            facade_over(store, redaction={"leads": {"company_name": "mask"}}),
            settings=RAGSettings(),
        )
        envelope = agent.run("leads at Acme", return_json=True)
        assert isinstance(envelope, dict)
        assert "error" not in envelope["metadata"]
        assert any("redacted" in part["reason"] for part in envelope["metadata"]["ignored"])

    def test_schema_documents_the_fields(self) -> None:
        """docs/envelope.schema.json is current and describes the redaction fields."""
        with open("docs/envelope.schema.json", encoding="utf-8") as handle:
            assert handle.read() == schema_json()
        schema = json.loads(schema_json())
        provenance = schema["$defs"]["Provenance"]["properties"]
        assert {"redacted", "source_hash"} <= set(provenance)


class TestFallbackPath:
    def test_the_fallback_model_sees_redacted_rows_and_records_say_so(
        self, store: MemoryStore
    ) -> None:
        """The LLM fallback's tools read through the facade: the model is handed redacted rows
        only, and its cited records carry the redaction in their provenance."""
        from rag_agent.understanding.llm.schema import SCHEMA_NAME
        from tests.support.extraction import answer
        from tests.unit.test_llm_scripted import ScriptedChatModel, call, calls, final

        model = ScriptedChatModel(
            script=[
                calls(call(SCHEMA_NAME, **answer())),  # filter extraction: nothing stated
                calls(
                    call(
                        "query_table",
                        table="leads",
                        filters=[{"column": "status", "op": "eq", "value": "new"}],
                    )
                ),
                final(("leads", 1)),
            ]
        )
        agent = RAGAgent(facade_over(store), settings=RAGSettings(), llm=model)
        envelope = agent.run("who scores highest?", return_json=True, include_raw=True)
        assert isinstance(envelope, dict)
        assert envelope["metadata"]["fallback"] == "agent"
        seen = " ".join(str(m.content) for messages in model.requests for m in messages)
        assert "j***@acme.io" in seen
        for secret in ("jane.doe@acme.io", "+1 555 0167", "CTO"):
            assert secret not in seen
        [record] = envelope["records"]
        provenance = record["provenance"]
        assert set(provenance["redacted"]) == {"email", "phone", "first_name", "last_name", "title"}
        assert row_hash(fields_of(record)) == provenance["row_hash"]
        assert provenance["raw_row"]["email"] == "j***@acme.io"


class TestPostgres:
    def test_redaction_on_postgres(self, postgres_clean: Any) -> None:
        """The same rules, pseudonyms and commitments on PostgreSQL, related rows included, and
        the probing filters refused before any statement runs."""
        postgres_clean.add_clients([1])
        postgres_clean.execute(
            "INSERT INTO leads (id, client_id, email, first_name, last_name, phone, title) "
            "VALUES (1, 1, %s, %s, %s, %s, %s)",
            (LEAD["email"], "Jane", "Doe", LEAD["phone"], "CTO"),
        )
        postgres_clean.execute(
            "INSERT INTO conversations (id, lead_id, channel) VALUES (5, 1, 'email')"
        )
        redaction = RedactionPolicy(
            {**{t: c for t, c in RULES.items() if t != "*"}, "conversations": {"channel": "hash"}},
            default=RULES["*"],
            key=KEY,
            lookups="all",  # the look-up by e-mail below finds the row
        )
        with (
            create_read_only_facade(
                "postgres", dsn=postgres_clean.reader_dsn, redaction=redaction
            ) as facade,
            create_read_only_facade("postgres", dsn=postgres_clean.reader_dsn) as holder,
        ):
            page = facade.read(
                "leads", [Filter("email", Op.IEQ, LEAD["email"])], include=["conversations"]
            )
            row = page.rows[0]
            assert row["email"] == "j***@acme.io" and row["phone"] == "***67"
            assert "title" not in row
            assert row["last_name"] == redaction.pseudonym("Doe")
            assert page.rows[0]["conversations"][0]["channel"] == redaction.pseudonym("email")
            original = holder.read("leads", [Filter("id", Op.EQ, 1)]).rows[0]
            fields = {k: v for k, v in row.items() if k != "conversations"}
            assert redaction.verify("leads", original, fields, row.redaction.source_hash)
            with pytest.raises(ColumnNotAllowedError, match="redacted"):
                facade.read("leads", [Filter("email", Op.ICONTAINS, "jane")])


class TestCommandLine:
    def test_rag_redact_applies_to_the_cli(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``RAG_REDACT`` reaches the facade the CLI builds: the sample's e-mails are masked
        and its phone numbers left out, in the JSON and in the table view alike."""
        from tests.support.cli import run

        monkeypatch.setenv("RAG_REDACT", "*.email=mask:email,leads.phone=drop")
        monkeypatch.setenv("RAG_REDACTION_KEY", KEY)
        code, out, _ = run("ask", "leads at acme", "--json")
        assert code == 0
        records = json.loads(out)["records"]
        assert records and all("***@" in r["email"] for r in records if r["email"])
        assert all("phone" not in r for r in records)
        assert all(r["provenance"]["redacted"]["phone"]["method"] == "drop" for r in records)
        code, table, _ = run("ask", "leads at acme", tty=True)
        assert code == 0 and "***@" in table
        assert KEY not in out + table


class TestSupabase:
    def test_redaction_over_postgrest(self, store: MemoryStore) -> None:
        """The Supabase backend's rows (and embedded related rows) leave the facade redacted."""
        import httpx

        from tests.support.postgrest import BASE_URL, PostgrestEmulator, fake_key

        with httpx.Client(transport=PostgrestEmulator(store).transport()) as http:
            facade = create_read_only_facade(
                "supabase",
                url=BASE_URL,
                key=fake_key("anon"),
                http_client=http,
                redaction={**RULES, "conversations": {"channel": "drop"}},
            )
            page = facade.read("leads", [Filter("id", Op.EQ, 1)], include=["conversations"])
            row = page.rows[0]
            assert row["email"] == "j***@acme.io" and "title" not in row
            assert "channel" not in row["conversations"][0]
            with pytest.raises(ColumnNotAllowedError, match="redacted"):
                facade.read("leads", [Filter("phone", Op.ICONTAINS, "555")])


class TestRulesFailClosed:
    def test_misspelt_column_is_an_error_at_start(self, store: MemoryStore) -> None:
        """A rule for a column the table does not have (a typo) stops the facade at start."""
        for rules in ({"leads": {"phnoe": "mask"}}, {"*": {"emial": "mask"}}, {"leeds": {}}):
            with pytest.raises(ConfigurationError, match="does not have"):
                facade_over(store, redaction=rules)
        env = {"RAG_REDACT": "leads.phnoe=mask:phone", "RAG_REDACTION_KEY": KEY}
        with pytest.raises(ConfigurationError, match=r"leads\.phnoe"):
            create_read_only_facade(
                "memory", store=store, settings=PersistenceSettings.from_env(env)
            )

    def test_mask_then_keep_keeps_the_mask(self, store: MemoryStore) -> None:
        """``leads.phone=mask`` then ``leads.phone=keep``: the phone stays masked."""
        env = {"RAG_REDACT": "leads.phone=mask,leads.phone=keep", "RAG_REDACTION_KEY": KEY}
        facade = create_read_only_facade(
            "memory", store=store, settings=PersistenceSettings.from_env(env)
        )
        row = facade.read("leads", [Filter("id", Op.EQ, 1)]).rows[0]
        assert row["phone"] == "***"

    def test_postgres_checks_on_first_read(self, postgres_clean: Any) -> None:
        """Where the catalog costs I/O, a misspelt rule fails the first read of its table."""
        with (
            create_read_only_facade(
                "postgres", dsn=postgres_clean.reader_dsn, redaction={"leads": {"phnoe": "mask"}}
            ) as facade,
            pytest.raises(ConfigurationError, match=r"leads\.phnoe"),
        ):
            facade.count("leads")
