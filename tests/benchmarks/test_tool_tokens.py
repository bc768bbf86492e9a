"""The tokens benchmark: every call measured, and the compact content never the larger."""

from __future__ import annotations

import json

from tests.benchmarks import tool_tokens


class TestToolTokens:
    def test_every_call_is_measured_and_compact_is_smaller(self) -> None:
        """Each representative call has both counts; compact never costs more than full."""
        report = tool_tokens.measure(quick=True)
        calls = report.figures["calls"]
        assert set(calls) == {label for label, _, _ in tool_tokens.CALLS}
        for figures in calls.values():
            assert 0 < figures["compact"] < figures["full"]
        assert 0 < report.figures["ratio_all"] < 1
        assert len(report.section.rows) == len(tool_tokens.CALLS)

    def test_approximation_grows_with_the_text(self) -> None:
        """The approximate counter counts at least one token per pre-tokenizer piece, and a
        hash costs more than a short word."""
        count = tool_tokens.approximate_tokens
        assert count("") == 0
        assert count("hello") == 1 and count("hello world") == 2
        digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        assert count(json.dumps({"row_hash": digest})) > 3 * count('{"id":1}')
