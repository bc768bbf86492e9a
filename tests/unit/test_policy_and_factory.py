"""Access policy rules and the backend factories."""

from __future__ import annotations

import types

import pytest

import persistence
from persistence import (
    BUSINESS_TABLES,
    GOVERNANCE_TABLES,
    AccessPolicy,
    ColumnNotAllowedError,
    ConfigurationError,
    MemoryBackend,
    MemoryStore,
    PersistenceSettings,
    TableNotAllowedError,
    create_persistence_agent,
    create_read_only_facade,
    default_store,
    known_kinds,
    register_backend,
)


class TestAccessPolicy:
    def test_read_only_policy_writes_nothing(self) -> None:
        """The read-only policy reads every business table and writes none."""
        policy = AccessPolicy.read_only()
        assert policy.read_tables == BUSINESS_TABLES
        assert policy.write_tables == frozenset()
        with pytest.raises(TableNotAllowedError):
            policy.check_write("leads")

    def test_writer_excludes_governance_tables(self) -> None:
        """The writer policy writes business tables minus governance tables."""
        policy = AccessPolicy.writer()
        assert policy.write_tables == BUSINESS_TABLES - GOVERNANCE_TABLES
        assert policy.check_write("leads") == "leads"

    def test_governance_tables_refused_even_if_listed(self) -> None:
        """A hand-built policy listing a governance table still cannot write it."""
        policy = AccessPolicy(frozenset({"clients"}), frozenset({"clients"}))
        with pytest.raises(TableNotAllowedError) as info:
            policy.check_write("clients")
        assert info.value.table == "clients"

    def test_column_policy(self) -> None:
        """A column allow-list refuses other columns of that table."""
        policy = AccessPolicy.read_only(columns={"leads": ["id", "email"]})
        policy.check_columns("leads", ["email"])
        with pytest.raises(ColumnNotAllowedError) as info:
            policy.check_columns("leads", ["phone"])
        assert info.value.column == "phone"

    def test_allowed_columns(self) -> None:
        """``allowed_columns`` is a table's column rule, or None where the policy sets none."""
        policy = AccessPolicy.read_only(columns={"leads": ["id", "email"]})
        assert policy.allowed_columns("leads") == frozenset({"id", "email"})
        assert policy.allowed_columns("clients") is None
        assert AccessPolicy.read_only().allowed_columns("leads") is None

    def test_malformed_names_are_configuration_errors(self) -> None:
        """A policy cannot be built with names that are not identifiers."""
        with pytest.raises(ConfigurationError):
            AccessPolicy(frozenset({"public.leads"}))


class TestFactories:
    def test_memory_factories_share_the_default_store(self) -> None:
        """Without store=, writer and facade see the same process-wide store."""
        create_persistence_agent(kind="memory").write("leads", {"email": "a@x.io"})
        assert create_read_only_facade(kind="memory").count("leads") == 1
        assert default_store().rows("leads")[0]["email"] == "a@x.io"

    def test_private_store(self) -> None:
        """store= isolates a facade from the default store."""
        store = MemoryStore()
        create_persistence_agent(kind="memory").write("leads", {"email": "a@x.io"})
        assert create_read_only_facade(kind="memory", store=store).count("leads") == 0

    def test_unknown_kind_lists_known_kinds(self) -> None:
        """An unknown kind raises ConfigurationError naming the known ones."""
        with pytest.raises(ConfigurationError, match="memory"):
            create_read_only_facade(kind="mongo")

    def test_unknown_option_is_refused(self) -> None:
        """A misspelt option is a ConfigurationError, not silently ignored."""
        with pytest.raises(ConfigurationError, match="stor"):
            create_read_only_facade(kind="memory", stor=MemoryStore())

    @pytest.mark.parametrize(
        ("kind", "options"),
        [
            ("memory", {}),
            ("postgres", {"dsn": "postgresql://127.0.0.1/x"}),
            ("supabase", {"url": "https://x.supabase.co", "key": "k"}),
        ],
    )
    def test_one_wording_for_unknown_options(self, kind: str, options: dict[str, str]) -> None:
        """Every bundled backend refuses a misspelt option in the same words, listing the rest."""
        with pytest.raises(
            ConfigurationError, match=rf"^unknown option\(s\) for kind='{kind}': bogus; accepted: "
        ):
            create_read_only_facade(kind=kind, bogus=1, **options)

    def test_memory_reads_no_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A bad backend variable does not concern the memory backend."""
        monkeypatch.setenv("RAG_STATEMENT_TIMEOUT_MS", "fast")
        assert create_read_only_facade(kind="memory").count("leads") == 0

    def test_settings_must_be_persistence_settings(self) -> None:
        """``settings=`` takes a PersistenceSettings (or a RAGSettings), nothing else."""
        with pytest.raises(ConfigurationError, match="settings= must be a PersistenceSettings"):
            create_read_only_facade(kind="postgres", settings={"postgres_dsn": "x"})  # type: ignore[arg-type]

    def test_missing_dsn_names_argument_and_variable(self) -> None:
        """Without dsn= and without RAG_POSTGRES_DSN in the settings, both are named."""
        with pytest.raises(
            ConfigurationError,
            match=r"kind='postgres' needs a connection string: pass dsn= or set RAG_POSTGRES_DSN",
        ) as info:
            create_read_only_facade(kind="postgres", settings=PersistenceSettings())
        assert info.value.variable == "RAG_POSTGRES_DSN"

    def test_register_backend(self) -> None:
        """A registered kind is built by the factories with read_only set."""
        seen: list[bool] = []

        def factory(*, read_only: bool) -> MemoryBackend:
            seen.append(read_only)
            return MemoryBackend(MemoryStore())

        register_backend("custom_test_kind", factory)
        assert "custom_test_kind" in known_kinds()
        create_read_only_facade(kind="custom_test_kind")
        create_persistence_agent(kind="custom_test_kind")
        assert seen == [True, False]

    def test_facade_does_not_expose_its_backend(self) -> None:
        """No public attribute of the facade is the backend or its store."""
        facade = create_read_only_facade(kind="memory")
        public = {name: getattr(facade, name) for name in dir(facade) if not name.startswith("_")}
        for value in public.values():
            assert not isinstance(value, MemoryBackend | MemoryStore)
        assert not hasattr(facade, "__dict__")


class TestPublicSurface:
    def test_all_matches_public_names(self) -> None:
        """persistence.__all__ lists exactly the public names the package defines."""
        # Submodules appear on the package once imported (by any test); they are not names.
        public = {
            name
            for name, value in vars(persistence).items()
            if not name.startswith("_") and not isinstance(value, types.ModuleType)
        }
        assert set(persistence.__all__) == public
        assert len(set(persistence.__all__)) == len(persistence.__all__)

    def test_column_types_vocabulary_is_exported(self) -> None:
        """The names column_types() answers in are importable from the package itself."""
        assert persistence.ColumnType is persistence.values.types.ColumnType
        assert persistence.column_type("int8") == persistence.ColumnType(
            persistence.ColumnKind.INTEGER, "bigint", 64
        )

    def test_error_tree(self) -> None:
        """The error classes form the documented tree."""
        e = persistence
        assert issubclass(e.TableNotAllowedError, e.PersistencePermissionError)
        assert issubclass(e.ColumnNotAllowedError, e.PersistencePermissionError)
        assert issubclass(e.QueryTimeoutError, e.BackendError)
        assert issubclass(e.BackendUnavailableError, e.BackendError)
        assert issubclass(e.InvalidQueryError, ValueError)
        for cls in (e.PersistencePermissionError, e.UnsupportedOperatorError, e.BackendError,
                    e.ConfigurationError, e.InvalidQueryError):  # fmt: skip
            assert issubclass(cls, e.PersistenceError)
            assert cls.__name__ in (e.errors.__doc__ or "")
