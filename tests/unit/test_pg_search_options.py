"""Options of the PostgreSQL search and of ``rag-agent index``, checked before any connection."""

from __future__ import annotations

import pytest

from persistence.admin.index_build import PHASES
from persistence.backends.postgres import SearchSettings, create_backend
from persistence.errors import ConfigurationError
from rag_agent.cli._common import UsageError
from rag_agent.cli.index import load_embeddings, phase_line
from tests.support.cli import run
from tests.support.pgvector import HashEmbeddings


class TestSearchSettings:
    @pytest.mark.parametrize("config", ["english", "pg_catalog.simple"])
    def test_configuration_names_are_accepted(self, config: str) -> None:
        """A text-search configuration is a name, optionally schema-qualified."""
        assert SearchSettings(text_search_config=config).text_search_config == config

    @pytest.mark.parametrize("config", ["english'); DROP TABLE x; --", "", "a.b.c", "eng lish"])
    def test_anything_else_is_refused(self, config: str) -> None:
        """The configuration is composed into SQL as a literal; still, only names pass."""
        with pytest.raises(ConfigurationError, match="text_search_config"):
            SearchSettings(text_search_config=config)

    @pytest.mark.parametrize("name", ["exact_rows", "rerank_rows", "keyword_candidates"])
    @pytest.mark.parametrize("value", [0, -1, 1.5, True])
    def test_bounds_are_positive_ints(self, name: str, value: object) -> None:
        with pytest.raises(ConfigurationError, match=name):
            SearchSettings(**{name: value})  # type: ignore[arg-type]

    def test_vector_columns_name_a_column_and_a_model(self) -> None:
        with pytest.raises(ConfigurationError, match="vector_columns"):
            SearchSettings(vector_columns={"inquiries": ("embedding",)})  # type: ignore[dict-item]

    def test_backend_option_must_be_settings(self) -> None:
        """``search=`` takes a SearchSettings; a dict is a configuration error."""
        with pytest.raises(ConfigurationError, match="search="):
            create_backend(dsn="postgresql://x@127.0.0.1/db", search={"exact_rows": 5})


class TestIndexCommand:
    def test_embeddings_by_import_path(self) -> None:
        """``module:attribute`` names a class, a factory or an instance of Embeddings."""
        made = load_embeddings("tests.support.pgvector:HashEmbeddings")
        assert isinstance(made, HashEmbeddings)

    @pytest.mark.parametrize("spec", ["nope", "no_such_module_xyz:thing", "json:nothing_here"])
    def test_bad_specs_are_usage_errors(self, spec: str) -> None:
        with pytest.raises(UsageError):
            load_embeddings(spec)

    def test_columns_and_dsn_are_required(self) -> None:
        """Without --columns and --dsn the command is a usage error (exit 2), nothing runs."""
        code, _, err = run("index", "inquiries")
        assert code == 2 and "--columns" in err

    def test_phase_line_names_every_phase_and_the_rate(self) -> None:
        """The human report's ``phases`` line: each phase's seconds, then rows per second."""
        phases = dict.fromkeys(PHASES, 0.0) | {"embedding": 41.23, "HNSW": 12.06}
        line = phase_line(phases, 1520.4)
        assert line.startswith("rows read 0.0 s · embedding 41.2 s · rows written 0.0 s")
        assert "HNSW 12.1 s · words 0.0 s · documents 0.0 s · other 0.0 s" in line
        assert line.endswith(" · 1,520 rows/s")
