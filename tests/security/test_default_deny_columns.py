"""Default-deny columns: a policy can say "only these columns anywhere"."""

from __future__ import annotations

import pytest

from persistence import (
    AccessPolicy,
    ColumnNotAllowedError,
    ConfigurationError,
    Filter,
    MemoryStore,
    Op,
    ReadOnlyPersistenceFacade,
    create_read_only_facade,
)
from rag_agent import RAGAgent, RAGSettings


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore()
    store.insert("clients", [{"id": 1, "name": "Client One", "industry": "secret margins"}])
    store.insert("leads", [{"id": 1, "email": "a@x.io", "phone": "+1-555-0100", "score": 7}])
    store.insert("messages", [{"id": 1, "conversation_id": 2, "body": "private text"}])
    return store


def facade_over(store: MemoryStore, **policy: object) -> ReadOnlyPersistenceFacade:
    return create_read_only_facade("memory", store=store, **policy)  # type: ignore[arg-type]


class TestDefaultColumns:
    def test_unnamed_tables_expose_only_the_defaults(self, store: MemoryStore) -> None:
        """A table the policy does not name returns, lists and filters on the defaults only."""
        facade = facade_over(
            store, columns={"leads": {"id", "email"}}, default_columns={"id", "name"}
        )
        assert facade.read("clients", [Filter("id", Op.EQ, 1)]).rows == [
            {"id": 1, "name": "Client One"}
        ]
        assert facade.columns("clients") == ("id", "name")
        assert facade.read("messages", [Filter("id", Op.EQ, 1)]).rows == [{"id": 1}]
        with pytest.raises(ColumnNotAllowedError):
            facade.read("clients", [Filter("industry", Op.ICONTAINS, "secret")])
        with pytest.raises(ColumnNotAllowedError):
            facade.read("messages", [Filter("id", Op.EQ, 1)], columns=["body"])

    def test_named_tables_keep_their_own_rule(self, store: MemoryStore) -> None:
        """A table named in ``columns`` follows its rule, not the defaults."""
        facade = facade_over(
            store, columns={"leads": {"id", "email"}}, default_columns={"id", "name"}
        )
        assert facade.read("leads", [Filter("id", Op.EQ, 1)]).rows == [{"id": 1, "email": "a@x.io"}]

    def test_empty_defaults_expose_nothing(self, store: MemoryStore) -> None:
        """``default_columns=()`` makes every unnamed table unreadable, column by column."""
        facade = facade_over(store, columns={"leads": {"id", "email"}}, default_columns=())
        assert facade.columns("clients") == ()
        with pytest.raises(ColumnNotAllowedError):
            facade.read("clients", [Filter("id", Op.EQ, 1)])
        assert facade.read("leads", [Filter("id", Op.EQ, 1)]).total_count == 1

    def test_without_defaults_unnamed_tables_stay_open(self, store: MemoryStore) -> None:
        """Backward compatible: no ``default_columns``, no restriction on unnamed tables."""
        facade = facade_over(store, columns={"leads": {"id", "email"}})
        [row] = facade.read("clients", [Filter("id", Op.EQ, 1)]).rows
        assert row["industry"] == "secret margins"

    def test_policy_validates_and_freezes_defaults(self) -> None:
        """Defaults are identifiers, held as a frozenset; a bare string is refused."""
        policy = AccessPolicy.read_only(default_columns=["id", "name"])
        assert policy.default_columns == frozenset({"id", "name"})
        with pytest.raises(ConfigurationError):
            AccessPolicy.read_only(default_columns="id")
        with pytest.raises(ConfigurationError):
            AccessPolicy.read_only(default_columns=["Name"])

    def test_agent_records_carry_only_allowed_columns(self, store: MemoryStore) -> None:
        """Through the agent, a record of an unnamed table holds only the default columns."""
        agent = RAGAgent(
            facade_over(store, columns={"leads": {"id"}}, default_columns={"id", "name"}),
            settings=RAGSettings(),
        )
        envelope = agent.run("client", table="clients", filters={"id": 1}, return_json=True)
        [record] = envelope["records"]
        assert {k for k in record if k != "provenance"} == {"id", "name"}
