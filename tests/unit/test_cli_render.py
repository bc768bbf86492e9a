"""The CLI's rendering: row text cannot reach the terminal as control sequences."""

from __future__ import annotations

import datetime as dt
import io
import json

from rag_agent.cli.render import emit, error_of
from rag_agent.envelope import build_records

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
HOSTILE_TEXT = "Acme\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\u202eevil\u2066\x7f"
_TERMINAL_CONTROLS = ("\x1b", "\x07", "\x9b", "\x7f", "\u202e", "\u2066")


class TestTerminalOutputIsInert:
    """Row text cannot send control sequences or bidi overrides to the user's terminal."""

    @staticmethod
    def _envelope() -> dict[str, object]:
        [record] = build_records(
            [{"id": 1, "company_name": HOSTILE_TEXT, "email": "a@x.io"}],
            source="persistence.leads",
            retrieved_at=NOW,
        )
        metadata = {
            "source": "persistence.leads",
            "query_filters": {"company": HOSTILE_TEXT},
            "retrieved_at": NOW.isoformat(),
            "total_count": 1,
            "error": {"type": "BackendError", "message": HOSTILE_TEXT},
        }
        return {"metadata": metadata, "records": [record.model_dump(mode="json")]}

    def test_text_rendering_has_no_control_characters(self) -> None:
        """The table, filters and error line show no escape, bell, C1, DEL or bidi control."""
        out = io.StringIO()
        emit(self._envelope(), False, out)
        text = out.getvalue()
        assert "Acme" in text and "evil" in text
        for control in _TERMINAL_CONTROLS:
            assert control not in text
        assert error_of(self._envelope()) is not None
        for control in _TERMINAL_CONTROLS:
            assert control not in (error_of(self._envelope()) or "")

    def test_json_output_escapes_them_and_keeps_the_value(self) -> None:
        """JSON output carries the controls as \\u escapes: same data, inert on a terminal."""
        out = io.StringIO()
        envelope = self._envelope()
        emit(envelope, True, out)
        text = out.getvalue()
        for control in _TERMINAL_CONTROLS:
            assert control not in text
        assert json.loads(text) == envelope
        assert "zoë" in _json_line({"name": "zoë"})


def _json_line(value: object) -> str:
    out = io.StringIO()
    emit(value, True, out)  # type: ignore[arg-type]
    return out.getvalue()


class TestAggregateRendering:
    """An aggregate envelope shows its groups as a grid, inertly."""

    def test_groups_as_a_grid(self) -> None:
        """Keys, then one column per metric; a capped answer says more groups exist; a hostile
        key is shown without its control characters."""
        metadata = {
            "source": "persistence.leads",
            "retrieved_at": NOW.isoformat(),
            "total_count": 3,
            "aggregates": {
                "group_by": ["status"],
                "metrics": ["count", "avg:score"],
                "groups": [
                    {"keys": {"status": HOSTILE_TEXT}, "values": {"count": 2, "avg:score": "1.5"}},
                    {"keys": {"status": None}, "values": {"count": 1, "avg:score": None}},
                ],
                "capped": True,
            },
        }
        out = io.StringIO()
        emit({"metadata": metadata, "records": []}, False, out)
        lines = out.getvalue().splitlines()
        assert lines[1].split() == ["status", "count", "avg:score"]
        assert "1.5" in lines[3] and "more groups exist" in lines[-1]
        for control in _TERMINAL_CONTROLS:
            assert control not in out.getvalue()


class TestRankingLine:
    """A ranked answer says so on a terminal, in one line: mode, legs, scores, degradation."""

    def test_ranked_search_on_the_sample(self) -> None:
        from tests.support.cli import run

        code, out, _ = run("ask", "inquiries about pricing", "--limit", "3", tty=True)
        assert code == 0
        [line] = [x for x in out.splitlines() if x.strip().startswith("ranked:")]
        assert 'ranked: keyword search for "pricing" (legs: keyword + trigram)' in line
        assert " · scores " in line
        assert "degraded: no embeddings are configured" in line

    def test_a_search_that_found_nothing_still_says_it_ran(self) -> None:
        from rag_agent.cli.render import format_envelope

        envelope = {
            "metadata": {
                "source": "persistence.leads",
                "total_count": 0,
                "fallback": "disabled",
                "ranking": {
                    "mode": "keyword",
                    "query": "quantum teleportation",
                    "legs": ["keyword", "trigram"],
                    "degraded": "no embeddings are configured, so the semantic leg did not run",
                },
            },
            "records": [],
        }
        status, ranking = format_envelope(envelope).splitlines()
        assert status == "persistence.leads · 0 matches · fallback: disabled"
        assert ranking == (
            '  ranked: keyword search for "quantum teleportation" (legs: keyword + trigram) · '
            "no row ranked · degraded: no embeddings are configured, so the semantic leg did "
            "not run"
        )

    def test_scores_are_the_records_relevance(self) -> None:
        from rag_agent.cli.render import format_envelope

        records = [
            {"id": i, "provenance": {"relevance": {"score": s, "rank": i, "ranks": {}}}}
            for i, s in ((1, 0.5), (2, 0.25))
        ]
        envelope = {
            "metadata": {
                "source": "persistence.leads",
                "total_count": 2,
                "ranking": {"mode": "hybrid", "query": "cloud", "legs": ["keyword", "semantic"]},
            },
            "records": records,
        }
        line = format_envelope(envelope).splitlines()[1]
        assert line.endswith("(legs: keyword + semantic) · scores 0.500 to 0.250")
