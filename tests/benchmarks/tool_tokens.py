"""Tokens a model reads per tool answer: the compact view against the full envelope.

Run alone: ``python -m tests.benchmarks.tool_tokens``. Representative calls of every data tool
on the bundled sample (memory backend, no LLM), each answered twice: with the compact content
the tools give by default and with the full envelope (``build_tools(agent, content="full")``,
what they gave before), both as the model receives them (untrusted-data markers included). The
ratio compact/full is what the model's context pays now for what it paid before; ``rows only``
is the floor (``json.dumps`` of the rows' own columns, compact separators).

Tokens are counted with tiktoken's ``o200k_base`` when its encoding file is already cached
(tiktoken downloads it otherwise, and benchmarks stay offline); else with the Llama 2 BPE
tokenizer (32k vocabulary) that the ``wordllama`` package bundles, read by ``tokenizers``; else
with an approximation: the text is split by ``cl100k_base``'s own pre-tokenizer pattern (no
token crosses these pieces) and each piece counts ``ceil(characters / 6)`` tokens, at least
one. The counter used is named in the report. Absolute counts differ between tokenizers (Llama
2's smaller vocabulary gives more tokens than o200k for the same text); the ratios, which are
what the benchmark reports on, move much less.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

from persistence import MemoryStore
from rag_agent import build_tools, create_rag_agent
from rag_agent.envelope.compact import compact_view
from rag_agent.ops.sample import load_sample
from tests.benchmarks.common import Section

#: (label, tool, arguments): the representative calls.
CALLS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("query_leads, 10 rows", "query_leads", {"company": "Globex", "limit": 10}),
    ("query_leads, free text", "query_leads", {"query": "qualified leads at Globex", "limit": 5}),
    ("query_table, 50 rows", "query_table", {"table": "leads", "limit": 50}),
    (
        "query_table, 5 rows + conversations",
        "query_table",
        {"table": "leads", "filters": {"client_id": 9}, "include": ["conversations"], "limit": 5},
    ),
    ("rag_agent, free text", "rag_agent", {"query": "leads at Globex Corporation", "limit": 10}),
    ("count_rows", "count_rows", {"table": "leads", "filters": {"status": "qualified"}}),
    ("aggregate_table by status", "aggregate_table", {"table": "leads", "group_by": ["status"]}),
    ("describe_table + 3 samples", "describe_table", {"table": "leads", "sample_rows": 3}),
    ("error (table refused)", "query_table", {"table": "secrets"}),
)

# cl100k_base's pre-tokenizer (tiktoken_ext.openai_public): BPE merges never cross its pieces.
_PIECES = regex.compile(
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*"""
    r"""|\s*[\r\n]|\s+(?!\S)|\s+"""
)


def approximate_tokens(text: str) -> int:
    """Tokens of ``text`` by the approximation in the module docstring."""
    return sum(max(1, math.ceil(len(piece) / 6)) for piece in _PIECES.findall(text))


def token_counter() -> tuple[str, Callable[[str], int]]:
    """The counter to use and its name: tiktoken's o200k_base if cached, else the
    approximation."""
    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or str(
        Path(tempfile.gettempdir()) / "data-gym-cache"
    )
    if Path(cache).is_dir() and any(Path(cache).iterdir()):
        try:
            import tiktoken

            encoding = tiktoken.get_encoding("o200k_base")
        except Exception:  # not cached after all: no download in a benchmark
            pass
        else:
            return "tiktoken o200k_base", lambda text: len(encoding.encode(text))
    llama = _bundled_llama_tokenizer()
    if llama is not None:
        return "Llama 2 BPE (bundled with wordllama)", llama
    return "approximation (cl100k pre-tokenizer pieces, ceil(chars/6) each)", approximate_tokens


def _bundled_llama_tokenizer() -> Callable[[str], int] | None:
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations)))
    config = path / "tokenizers" / "l2_supercat_tokenizer_config.json"
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(config))
    except Exception:  # not installed, or another wordllama layout
        return None
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


@dataclass(frozen=True)
class Measure:
    """One call's tokens in each form."""

    label: str
    full: int
    compact: int
    rows_only: int | None

    @property
    def ratio(self) -> float:
        return self.compact / self.full


@dataclass
class TokensReport:
    """The report's section and the raw figures."""

    section: Section
    figures: dict[str, Any]


def _text(tool: Any, args: dict[str, Any]) -> tuple[str, Any]:
    message = tool.invoke({"name": tool.name, "args": args, "id": "b", "type": "tool_call"})
    return str(message.content), message.artifact


def measure_calls(count: Callable[[str], int]) -> list[Measure]:
    """Every call of :data:`CALLS`, counted in both forms."""
    store = MemoryStore()
    load_sample(store)
    agent = create_rag_agent(kind="memory", store=store, llm=None)
    compact = {tool.name: tool for tool in build_tools(agent)}
    full = {tool.name: tool for tool in build_tools(agent, content="full")}
    measures = []
    for label, name, args in CALLS:
        compact_text, artifact = _text(compact[name], args)
        full_text, _ = _text(full[name], args)
        rows = compact_view(artifact).get("rows") if name != "describe_table" else None
        floor = json.dumps(rows, ensure_ascii=False, separators=(",", ":")) if rows else None
        measures.append(
            Measure(label, count(full_text), count(compact_text), floor and count(floor))
        )
    return measures


def measure(*, quick: bool = True) -> TokensReport:
    """The tokens section of the report (the calls are cheap: quick and full modes agree)."""
    name, count = token_counter()
    measures = measure_calls(count)
    section = Section(
        "Tool output: tokens per answer, compact vs full envelope",
        "What a model reads per tool call on the bundled sample: the compact content the tools "
        "give by default, against the full envelope they gave before (records with provenance, "
        f"summary, metadata), both with their untrusted-data markers. Tokens: {name}.",
        ("Call", "Full envelope", "Compact", "Compact / full", "Rows only", "Compact / rows"),
    )
    for m in measures:
        section.rows.append(
            (
                m.label,
                m.full,
                m.compact,
                f"{m.ratio:.2f}",
                m.rows_only if m.rows_only is not None else "—",
                f"{m.compact / m.rows_only:.2f}" if m.rows_only else "—",
            )
        )
    total_full = sum(m.full for m in measures)
    total_compact = sum(m.compact for m in measures)
    section.notes.append(
        f"All calls together: {total_compact:,} tokens compact against {total_full:,} full "
        f"({total_compact / total_full:.2f}). The full envelope stays the tool's artifact (and "
        "an MCP answer's structured content) for the program."
    )
    figures = {
        "counter": name,
        "calls": {
            m.label: {"full": m.full, "compact": m.compact, "rows": m.rows_only} for m in measures
        },
        "ratio_all": total_compact / total_full,
    }
    return TokensReport(section, figures)


def main() -> None:
    """Print the table."""
    report = measure()
    print(report.section.intro)
    print(" | ".join(report.section.columns))
    for row in report.section.rows:
        print(" | ".join(str(cell) for cell in row))
    for note in report.section.notes:
        print(note)


if __name__ == "__main__":
    main()
