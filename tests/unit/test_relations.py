"""Related rows: ``Relation``, ``Include``, ``facade.relations`` and ``read(include=...)`` on the
memory backend and over the PostgREST emulator (exact wire requests)."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

import httpx
import pytest

from persistence import (
    AccessPolicy,
    ColumnNotAllowedError,
    ConfigurationError,
    Filter,
    InvalidQueryError,
    MemoryBackend,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    TableNotAllowedError,
    UnsupportedOperatorError,
    create_persistence_agent,
    create_read_only_facade,
)
from persistence.backends.supabase.postgrest.embed import parse_relations
from persistence.relations import MAX_RELATED_LIMIT, Include, RelatedRows, Relation
from persistence.schema import REFERENCE, SUPABASE_STYLE
from tests.support.postgrest import BASE_URL, PostgrestEmulator, describe, fake_key


def _store() -> MemoryStore:
    """Two leads; lead 1 has three conversations (two by email), the first with two messages."""
    store = MemoryStore()
    agent = create_persistence_agent(kind="memory", store=store)
    agent.batch("leads", [{"email": "a@x.io"}, {"email": "b@x.io"}])
    agent.batch(
        "conversations",
        [
            {"lead_id": 1, "channel": "email"},
            {"lead_id": 1, "channel": "phone"},
            {"lead_id": 1, "channel": "email"},
        ],
    )
    agent.batch("messages", [{"conversation_id": 1, "body": "hi"}, {"conversation_id": 1}])
    return store


class TestRelation:
    def test_name_defaults_to_the_child_table(self) -> None:
        """A relation without a name is named after its child table."""
        assert Relation("leads", "id", "conversations", "lead_id").name == "conversations"

    def test_names_must_be_identifiers(self) -> None:
        """A relation naming something that is not an identifier is a configuration error."""
        with pytest.raises(ConfigurationError):
            Relation("leads", "id", "conversations; drop", "lead_id")

    def test_the_reference_schemas_declare_their_foreign_keys(self) -> None:
        """Both schema variants declare the same nine relations, and the DDL references."""
        wanted = {
            ("leads", "client_id", "clients"),
            ("leads", "campaign_id", "campaigns"),
            ("campaigns", "client_id", "clients"),
            ("sequences", "campaign_id", "campaigns"),
            ("conversations", "lead_id", "leads"),
            ("messages", "conversation_id", "conversations"),
            ("inquiries", "lead_id", "leads"),
            ("inquiries", "client_id", "clients"),
            ("staging_leads", "client_id", "clients"),
        }
        for variant in (REFERENCE, SUPABASE_STYLE):
            got = {(r.child_table, r.child_column, r.parent_table) for r in variant.relations}
            assert got == wanted
            assert "references clients(id)" in variant.ddl["leads"]

    def test_two_relations_of_one_name_are_refused(self) -> None:
        """A backend refuses two relations of the same parent under one name."""
        twice = [Relation("leads", "id", "conversations", "lead_id")] * 2
        with pytest.raises(ConfigurationError):
            MemoryBackend(MemoryStore(), twice)


class TestInclude:
    def test_paths_must_be_dotted_identifiers(self) -> None:
        """An include path that is not relation names separated by dots is refused."""
        for path in ("", "a..b", "Conversations", "a.b;", 7):
            with pytest.raises(InvalidQueryError):
                Include(path)  # type: ignore[arg-type]

    def test_limits_are_bounded(self) -> None:
        """A per-parent limit outside 1..MAX_RELATED_LIMIT is refused."""
        for limit in (0, MAX_RELATED_LIMIT + 1, True, "3"):
            with pytest.raises(InvalidQueryError):
                Include("conversations", limit=limit)  # type: ignore[arg-type]


class TestMemoryInclude:
    def test_children_sit_under_the_relation_name_in_id_order(self) -> None:
        """Each lead carries its conversations (all columns) in id order; a lead without any
        carries an empty list."""
        facade = create_read_only_facade(kind="memory", store=_store())
        rows = facade.read("leads", include=["conversations"], order=["id"]).rows
        assert [c["id"] for c in rows[0]["conversations"]] == [1, 2, 3]
        assert rows[0]["conversations"][0] == {
            "id": 1,
            "lead_id": 1,
            "channel": "email",
            "status": None,
            "started_at": None,
        }
        assert rows[1]["conversations"] == []
        assert not rows[0]["conversations"].cut

    def test_the_per_parent_limit_cuts_and_says_so(self) -> None:
        """A list cut by the per-parent limit is flagged; one that fits is not."""
        facade = create_read_only_facade(kind="memory", store=_store())
        rows = facade.read("leads", include=[Include("conversations", limit=2)]).rows
        assert isinstance(rows[0]["conversations"], RelatedRows)
        assert [c["id"] for c in rows[0]["conversations"]] == [1, 2]
        assert rows[0]["conversations"].cut
        assert not rows[1]["conversations"].cut

    def test_child_filters_are_coerced_and_applied(self) -> None:
        """Child filter values are coerced to the child column's type and narrow the children
        only, never the parents."""
        facade = create_read_only_facade(kind="memory", store=_store())
        wanted = Include("conversations", filters=(Filter("id", Op.GTE, "2"),))
        page = facade.read("leads", include=[wanted])
        assert page.total_count == 2
        assert [c["id"] for c in page.rows[0]["conversations"]] == [2, 3]
        with pytest.raises(InvalidQueryError, match="conversations"):
            facade.read("leads", include=[Include("conversations", (Filter("id", Op.EQ, "x"),))])

    def test_two_levels(self) -> None:
        """``conversations.messages`` nests each conversation's messages under it."""
        facade = create_read_only_facade(kind="memory", store=_store())
        (lead, _) = facade.read("leads", include=["conversations.messages"]).rows
        assert [m["id"] for m in lead["conversations"][0]["messages"]] == [1, 2]
        assert lead["conversations"][1]["messages"] == []

    def test_the_total_cap_cuts_in_parent_order(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Past the total, later lists are cut (and flagged) and the page says so."""
        monkeypatch.setattr("persistence.relations.RELATED_TOTAL_LIMIT", 2)
        facade = create_read_only_facade(kind="memory", store=_store())
        page = facade.read("leads", include=["conversations.messages"])
        conversations = page.rows[0]["conversations"]
        assert [c["id"] for c in conversations] == [1, 2]
        assert conversations.cut
        assert conversations[0]["messages"] == [] and conversations[0]["messages"].cut
        assert page.related_capped

    def test_unknown_relations_are_typed_errors(self) -> None:
        """A name that is no relation of the table is refused, naming the known ones."""
        facade = create_read_only_facade(kind="memory", store=_store())
        with pytest.raises(InvalidQueryError, match="inquiries"):
            facade.read("leads", include=["messages"])
        with pytest.raises(InvalidQueryError):
            facade.read("leads", include="conversations")  # type: ignore[arg-type]

    def test_the_parent_key_must_be_read(self) -> None:
        """Including children needs the parent's key among the columns read."""
        facade = create_read_only_facade(kind="memory", store=_store())
        with pytest.raises(InvalidQueryError, match="'id'"):
            facade.read("leads", columns=["email"], include=["conversations"])

    def test_both_tables_must_be_allowed(self) -> None:
        """A child table outside the allow-list is refused, and named in no error."""
        policy = AccessPolicy.read_only(tables=["leads", "inquiries"])
        facade = ReadOnlyPersistenceFacade(MemoryBackend(_store()), policy)
        assert [r.name for r in facade.relations("leads")] == ["inquiries"]
        with pytest.raises(InvalidQueryError) as refused:
            facade.read("leads", include=["conversations"])
        assert "['inquiries']" in str(refused.value)
        with pytest.raises(TableNotAllowedError):
            facade.read("secrets", include=["conversations"])

    def test_the_child_column_policy_applies(self) -> None:
        """Children show only the columns the policy allows, and a join column it forbids
        refuses the include."""
        columns = {"leads": {"id", "email"}, "conversations": {"id", "lead_id", "channel"}}
        policy = AccessPolicy.read_only(columns=columns)
        facade = ReadOnlyPersistenceFacade(MemoryBackend(_store()), policy)
        row = facade.read("leads", include=["conversations"]).rows[0]
        assert set(row["conversations"][0]) == {"id", "lead_id", "channel"}
        hidden = AccessPolicy.read_only(columns={"conversations": {"id", "channel"}})
        facade = ReadOnlyPersistenceFacade(MemoryBackend(_store()), hidden)
        with pytest.raises(ColumnNotAllowedError):
            facade.read("leads", include=["conversations"])

    def test_a_backend_without_related_reads_refuses(self) -> None:
        """A backend that cannot read related rows gives a typed error, not a partial page."""

        class Plain(MemoryBackend):
            read_related = None  # type: ignore[assignment]

        facade = ReadOnlyPersistenceFacade(Plain(_store()), AccessPolicy.read_only())
        with pytest.raises(UnsupportedOperatorError):
            facade.read("leads", include=["conversations"])


class TestSupabaseEmbedding:
    def _facade(self, emulator: PostgrestEmulator) -> ReadOnlyPersistenceFacade:
        http = httpx.Client(transport=emulator.transport())
        return create_read_only_facade(
            kind="supabase", url=BASE_URL, key=fake_key("anon"), http_client=http
        )

    def test_the_wire_request_embeds_each_level(self) -> None:
        """One request embeds conversations and their messages, with each level's order, limit
        and filters under its path."""
        emulator = PostgrestEmulator(_store())
        facade = self._facade(emulator)
        wanted = Include("conversations", (Filter("channel", Op.EQ, "email"),), limit=2)
        page = facade.read(
            "leads", columns=["id", "email"], include=[wanted, "conversations.messages"]
        )
        (request,) = [r for r in emulator.requests if r.url.path == "/rest/v1/leads"]
        assert parse_qsl(request.url.query.decode()) == [
            (
                "select",
                "id,email,conversations(id,lead_id,channel,status,started_at,"
                "messages(id,conversation_id,direction,body,sent_at))",
            ),
            ("conversations.channel", "eq.email"),
            ("conversations.order", "id.asc"),
            ("conversations.limit", "3"),
            ("conversations.messages.order", "id.asc"),
            ("conversations.messages.limit", "21"),
            ("order", "id.asc"),
            ("limit", "1000"),
        ]
        assert [c["id"] for c in page.rows[0]["conversations"]] == [1, 3]
        assert [m["id"] for m in page.rows[0]["conversations"][0]["messages"]] == [1, 2]

    def test_relations_come_from_the_api_description(self) -> None:
        """The foreign-key notes of the OpenAPI description are the relations."""
        emulator = PostgrestEmulator(_store())
        facade = self._facade(emulator)
        assert {r.name for r in facade.relations("leads")} == {"conversations", "inquiries"}
        assert set(parse_relations(describe(MemoryStore(), REFERENCE.relations))) == set(
            REFERENCE.relations
        )

    def test_declared_relations_win(self) -> None:
        """``relations=`` replaces what the description says."""
        http = httpx.Client(transport=PostgrestEmulator(_store()).transport())
        only = [Relation("leads", "id", "conversations", "lead_id", "talks")]
        facade = create_read_only_facade(
            kind="supabase", url=BASE_URL, key=fake_key("anon"), http_client=http, relations=only
        )
        assert facade.relations("leads") == tuple(only)
        with pytest.raises(ConfigurationError):
            create_read_only_facade(
                kind="supabase", url=BASE_URL, key=fake_key("anon"), relations=["leads"]
            )

    def test_an_alias_names_a_relation_unlike_its_table(self) -> None:
        """A relation named otherwise than its child table is embedded under an alias."""
        talks = [Relation("leads", "id", "conversations", "lead_id", "talks")]
        emulator = PostgrestEmulator(_store(), relations=talks)
        http = httpx.Client(transport=emulator.transport())
        facade = create_read_only_facade(
            kind="supabase", url=BASE_URL, key=fake_key("anon"), http_client=http, relations=talks
        )
        page = facade.read("leads", columns=["id"], include=["talks"])
        assert [c["id"] for c in page.rows[0]["talks"]] == [1, 2, 3]
        select = dict(parse_qsl(emulator.requests[-1].url.query.decode()))["select"]
        assert select.startswith("id,talks:conversations(")

    def test_a_literal_star_in_child_text_is_refused(self) -> None:
        """A child filter whose '*' PostgREST would read as a wildcard is a typed error."""
        facade = self._facade(PostgrestEmulator(_store()))
        starred = Include("conversations", (Filter("channel", Op.ICONTAINS, "a*"),))
        with pytest.raises(UnsupportedOperatorError):
            facade.read("leads", include=[starred])

    def test_rows_are_json_as_the_server_sent_them(self) -> None:
        """Embedded rows keep the server's JSON values (no extra keys, no lost ones)."""
        facade = self._facade(PostgrestEmulator(_store()))
        row = facade.read("leads", columns=["id"], include=["conversations"]).rows[0]
        assert json.loads(json.dumps(row))["conversations"][0]["channel"] == "email"
