"""Rendering envelopes for a terminal, and choosing between text and JSON."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from rag_agent.cli._common import (
    EXIT_OK,
    EXIT_QUERY_ERROR,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    Envelope,
    cli_words,
    isatty,
)

# Columns shown first on a terminal for the tables people ask about most; the rest follow.
_PREFERRED_COLUMNS = {
    "leads": ("id", "first_name", "last_name", "email", "company_name", "title", "status", "score"),
}
_MAX_CELL = 32
_MAX_TABLE_COLUMNS = 8
# Row text is untrusted: C0/C1 controls and DEL would reach the terminal as escape sequences
# (clear the screen, set the title, write the clipboard), bidi controls would reorder what is
# shown. JSON already escapes C0 controls; these are the rest.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_JSON_EXTRA_CONTROLS = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _inert(text: str) -> str:
    """``text`` with every terminal or bidi control shown as U+FFFD, newlines kept."""
    return "\n".join(_CONTROLS.sub("\ufffd", line) for line in text.split("\n"))


def _json_text(value: Any) -> str:
    # A \u escape inside a JSON string is the same value, and inert on a terminal.
    text = json.dumps(value, ensure_ascii=False, default=str)
    return _JSON_EXTRA_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _cell(value: Any, max_cell: int | None = _MAX_CELL) -> str:
    text = "" if value is None else str(value)
    text = " ".join(text.split())  # newlines and tabs would break the grid
    if max_cell is None or len(text) <= max_cell:
        return text
    return text[: max_cell - 1] + "…"


def _columns_for(table: str, records: Sequence[Mapping[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for record in records:
        seen.update(dict.fromkeys(k for k in record if k != "provenance"))
    preferred = [c for c in _PREFERRED_COLUMNS.get(table, ()) if c in seen]
    rest = [c for c in seen if c not in preferred]
    return (preferred + rest)[:_MAX_TABLE_COLUMNS]


def format_grid(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, max_cell: int | None = _MAX_CELL
) -> str:
    """A plain-text table: one header line, a rule, one line per row; long cells are cut."""
    cells = [[_cell(v, max_cell) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )
    return "\n".join(lines)


def format_envelope(
    envelope: Mapping[str, Any], *, max_rows: int | None = None, backend: str | None = None
) -> str:
    """A readable rendering of an envelope: a status line, the records, the summary.

    ``backend`` (``"postgres"``, …) opens the status line: the reader sees who answered.
    """
    meta = envelope.get("metadata", {})
    records = list(envelope.get("records", []))
    source = str(meta.get("source", "?"))
    table = source.removeprefix("persistence.")
    total = meta.get("total_count", len(records))
    offset = meta.get("offset") or 0
    status = [f"{backend}: {source}" if backend else source]
    at_least = "at least " if meta.get("total_exact") is False else ""
    status.append(f"{at_least}{total} match{'es' if total != 1 else ''}")
    if meta.get("count_only"):
        status.append("count only")
    if records:
        status.append(f"rows {offset + 1}-{offset + len(records)}")
    for key in ("cache", "fallback"):
        if meta.get(key):
            status.append(f"{key}: {meta[key]}")
    if meta.get("query_filters"):
        status.append(
            "filters: " + json.dumps(meta["query_filters"], ensure_ascii=False, default=str)
        )
    lines = [" · ".join(status)]
    context = meta.get("context")
    if isinstance(context, Mapping) and context.get("kind") != "fresh":
        lines.append(_context_line(context))
    answer = meta.get("answer")
    if isinstance(answer, Mapping):
        lines.extend(_answer_lines(answer))
    ranking = meta.get("ranking")
    if isinstance(ranking, Mapping):
        lines.append(_ranking_line(ranking, records))
    for part in meta.get("ignored") or ():
        lines.append(f"  not applied: {part.get('text')} ({part.get('reason')})")
    for attempt in meta.get("reformulation_attempts") or ():
        lines.append(
            f"  reformulation {attempt.get('reason')}: "
            f"{json.dumps(attempt.get('filters'), ensure_ascii=False)} "
            f"-> {attempt.get('result_count')} rows"
        )
    error = error_of(envelope)
    if error:
        lines.append(f"error: {error}")
    if records:
        shown = records if max_rows is None else records[:max_rows]
        headers = _columns_for(table, shown)
        lines.append(format_grid(headers, [[r.get(h) for h in headers] for r in shown]))
        if len(shown) < len(records):
            lines.append(f"… {len(records) - len(shown)} more rows on this page")
    aggregates = meta.get("aggregates")
    if isinstance(aggregates, Mapping):
        lines.append(_format_aggregates(aggregates))
    if meta.get("summary"):
        lines.append(f"{total} matches; summary of the returned page:")
        lines.append(_format_summary(meta.get("summary")))
    if meta.get("has_more"):
        lines.append(f"more rows: --offset {meta.get('next_offset')}")
    trace = meta.get("trace")
    if isinstance(trace, Mapping):
        lines.extend(_trace_lines(trace))
    return "\n".join(lines)


def _context_line(context: Mapping[str, Any]) -> str:
    """How a follow-up was read: its kind, the turn it built on, what it carried and dropped."""
    line = f"  follow-up ({context.get('kind')} of turn {context.get('turn')})"
    carried = context.get("carried") or []
    if carried:
        line += ": kept " + "; ".join(map(str, carried))
    dropped = context.get("dropped") or []
    if dropped:
        line += " · dropped " + "; ".join(map(str, dropped))
    return line


def _answer_lines(answer: Mapping[str, Any]) -> list[str]:
    """The fallback model's answer above the rows, and the rows it cites."""
    if answer.get("withheld"):
        lines = [f"answer withheld: {answer['withheld']}"]
    else:
        lines = [f"answer: {answer.get('text', '')}"]
    cited = [f"{c.get('table')}#{c.get('id')}" for c in answer.get("citations") or ()]
    if cited:
        lines.append("  cites: " + ", ".join(cited))
    if answer.get("dropped_citations"):
        lines.append(f"  {answer['dropped_citations']} citation(s) of rows never read dropped")
    return lines


def _trace_lines(trace: Mapping[str, Any], indent: str = "  ") -> list[str]:
    """The trace as lines: each step with its time, its table, conditions and rows."""
    lines = [f"trace: {trace.get('total_ms', 0):.1f} ms in all"] if indent == "  " else []
    for step in trace.get("steps") or ():
        parts = [f"{indent}{step.get('ms', 0):8.1f} ms  {step.get('step')}"]
        if step.get("table"):
            parts.append(str(step["table"]))
        if step.get("conditions"):
            parts.append("[" + ", ".join(step["conditions"]) + "]")
        if step.get("rows") is not None or step.get("total") is not None:
            parts.append(f"-> {step.get('rows', '-')} of {step.get('total', '-')}")
        if step.get("status", "ok") != "ok":
            parts.append(str(step["status"]))
        if step.get("note"):
            parts.append(f"({step['note']})")
        lines.append(" ".join(parts))
        if step.get("steps"):
            lines.extend(_trace_lines({"steps": step["steps"]}, indent + "    "))
    if trace.get("omitted"):
        lines.append(f"{indent}… {trace['omitted']} more steps not kept")
    return lines


def _ranking_line(ranking: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> str:
    """One line for a ranked answer: the mode and its legs, the scores shown, what did not run.

    Without it a ranked search looks like a plain read on a terminal, and a search that ran and
    found nothing looks like no search at all.
    """
    legs = " + ".join(str(leg) for leg in ranking.get("legs") or ()) or "none"
    parts = [f"ranked: {ranking.get('mode', '?')} search for {_json_text(ranking.get('query'))}"]
    parts[0] += f" (legs: {legs})"
    scores = [
        float(relevance["score"])
        for record in records
        if isinstance(relevance := (record.get("provenance") or {}).get("relevance"), Mapping)
        and isinstance(relevance.get("score"), int | float)
    ]
    if scores:
        parts.append(f"scores {max(scores):.3f} to {min(scores):.3f}")
    else:
        parts.append("no row ranked")
    corrections = ranking.get("corrections")
    if isinstance(corrections, Mapping) and corrections:
        parts.append(
            "read as: " + ", ".join(f"{typed} -> {read}" for typed, read in corrections.items())
        )
    if ranking.get("degraded"):
        parts.append(f"degraded: {ranking['degraded']}")
    return "  " + " · ".join(parts)


def _format_aggregates(aggregates: Mapping[str, Any]) -> str:
    """The groups of ``metadata.aggregates`` as a grid: key columns, then one per metric."""
    keys, metrics = list(aggregates.get("group_by") or ()), list(aggregates.get("metrics") or ())
    rows = [
        [g.get("keys", {}).get(k) for k in keys] + [g.get("values", {}).get(m) for m in metrics]
        for g in aggregates.get("groups") or ()
    ]
    text = format_grid(keys + metrics, rows)
    if aggregates.get("capped"):
        text += "\n… more groups exist (capped)"
    return text


def _format_summary(summary: Any) -> str:
    if not isinstance(summary, Mapping) or not isinstance(summary.get("columns"), Mapping):
        return "  " + json.dumps(summary, ensure_ascii=False, default=str)
    columns: Mapping[str, Any] = summary["columns"]
    width = max((len(c) for c in columns), default=0)
    lines = []
    for column, stats in columns.items():
        if not isinstance(stats, Mapping):
            continue
        parts = [f"{stats.get('distinct', '?')} distinct, {stats.get('nulls', 0)} null"]
        top = [t for t in stats.get("top") or () if isinstance(t, Mapping)]
        if top:
            parts.append(
                "top: " + ", ".join(f"{_cell(t.get('value'), 24)} ({t.get('count')})" for t in top)
            )
        if "min" in stats:
            parts.append(f"min {_cell(stats['min'], 24)}, max {_cell(stats.get('max'), 24)}")
        lines.append(f"  {column.ljust(width)}  " + " · ".join(parts))
    return "\n".join(lines)


def emit(
    envelope: Envelope,
    as_json: bool,
    out: TextIO,
    *,
    max_rows: int | None = None,
    backend: str | None = None,
) -> None:
    """Write ``envelope``: JSON (the envelope alone) or the readable view naming ``backend``."""
    if as_json:
        out.write(_json_text(envelope) + "\n")
    else:
        out.write(_inert(format_envelope(envelope, max_rows=max_rows, backend=backend)) + "\n")


def wants_json(args: argparse.Namespace, out: TextIO) -> bool:
    return bool(getattr(args, "json", False)) or not isatty(out)


def error_of(envelope: Mapping[str, Any]) -> str | None:
    """The envelope's error as one line (``"Type: message"``), or ``None``."""
    error = envelope.get("metadata", {}).get("error")
    if error in (None, ""):
        return None
    if isinstance(error, Mapping):
        kind, message = error.get("type"), error.get("message")
        error = f"{kind}: {message}" if kind else message
    return _inert(" ".join(str(error).split()))


# Envelope errors that mean the backend did not answer, not that the request was wrong.
_UNAVAILABLE = frozenset({"BackendUnavailableError", "QueryTimeoutError"})
# Envelope errors that mean the configuration is wrong (a privileged role, a bad key): the
# command line or the environment must change, not the question (docs/cli.md: exit 2).
_CONFIGURATION = frozenset({"ConfigurationError"})


def exit_code_of(envelope: Mapping[str, Any]) -> int:
    """0 for an answer; 3 when the backend was unavailable or timed out; 2 for a configuration
    error (a privileged role, a refused key); 1 for other errors."""
    error = envelope.get("metadata", {}).get("error")
    if error in (None, ""):
        return EXIT_OK
    kind = error.get("type") if isinstance(error, Mapping) else None
    if kind in _UNAVAILABLE:
        return EXIT_UNAVAILABLE
    return EXIT_USAGE if kind in _CONFIGURATION else EXIT_QUERY_ERROR


def failure_line(envelope: Mapping[str, Any]) -> str:
    """The stderr line of a failed envelope (``""`` when it did not fail), as docs/cli.md says:
    ``rag-agent: error: <message>`` for a configuration error, in the command line's words
    (``--allow-privileged``), else ``rag-agent: query failed: <Type>: <message>``."""
    error = error_of(envelope)
    if error is None:
        return ""
    if exit_code_of(envelope) == EXIT_USAGE:
        message = error.split(": ", 1)[-1]
        return f"rag-agent: error: {cli_words(message)}\n"
    return f"rag-agent: query failed: {error}\n"
