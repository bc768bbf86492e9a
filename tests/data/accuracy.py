"""Accuracy of ``understand`` on the labelled request set (``understanding_queries.jsonl``).

Each line is ``{"text", "table", "class", "expected": {"table", "conditions", "count_only",
"ignored", "weak"[, "group_by"][, "include"]}}`` (``group_by``, the columns counted by, is
``[]`` when left out; ``include``, the tables whose related rows are asked for, none when left
out): ``table`` is the table the caller gives (``null``: none), conditions are
``[column, op, value]`` with datetimes as ISO 8601 strings and ``in`` values as lists, and every
relative date is read against :data:`NOW`. A request is an exact match when the table, the
conditions (as a multiset), ``count_only``, ``weak``, ``group_by``, ``include`` and the ignored
parts all
agree; an ignored part matches when one text contains the other (case-insensitive), as where a
span starts is a matter of taste, and the number of ignored parts must agree.

Run ``python -m tests.data.accuracy`` to print the per-field and per-class table.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_agent.specs import Understanding
from rag_agent.understanding.filters import understand

LABELLED = Path(__file__).resolve().parent / "understanding_queries.jsonl"
#: The clock every relative date of the set is read against (a Wednesday).
NOW = dt.datetime(2025, 6, 18, 12, 0, tzinfo=dt.UTC)

Understand = Callable[[str, str | None], Understanding]


def load() -> list[dict[str, Any]]:
    """The labelled requests, in file order."""
    with LABELLED.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


def labels(found: Understanding) -> dict[str, Any]:
    """``found`` in the labelled set's form."""
    return {
        "table": found.table,
        "conditions": [[c.column, c.op.value, _plain(c.value)] for c in found.conditions],
        "count_only": found.count_only,
        "ignored": [item.text for item in found.ignored],
        "weak": found.weak,
        "group_by": list(found.group_by),
        "include": list(found.include),
    }


def _key(condition: list[Any]) -> str:
    return json.dumps(condition, sort_keys=True, ensure_ascii=False)


def ignored_match(expected: Iterable[str], got: Iterable[str]) -> int:
    """How many expected ignored parts have a distinct found part containing or inside them."""
    left = [text.casefold() for text in got]
    matched = 0
    for text in (t.casefold() for t in expected):
        hit = next((g for g in left if text in g or g in text), None)
        if hit is not None:
            left.remove(hit)
            matched += 1
    return matched


@dataclass
class Tally:
    """True positives, false positives and misses of one field."""

    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float:
        """Share of what was found that was expected (1.0 when nothing was found)."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        """Share of what was expected that was found (1.0 when nothing was expected)."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0


@dataclass
class Report:
    """Scores of a run over a labelled set."""

    total: int = 0
    exact: int = 0
    fields: dict[str, Tally] = field(default_factory=dict)
    classes: dict[str, list[int]] = field(default_factory=dict)  # class -> [exact, total]
    wrong_conditions: Counter[str] = field(default_factory=Counter)  # class -> count
    misses: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)

    @property
    def exact_rate(self) -> float:
        """Share of requests understood exactly."""
        return self.exact / self.total if self.total else 1.0

    def class_rate(self, name: str) -> float:
        """Exact-match rate of one class."""
        hits, total = self.classes[name]
        return hits / total


def _tally(report: Report, name: str, tp: int, fp: int, fn: int) -> None:
    tally = report.fields.setdefault(name, Tally())
    tally.tp, tally.fp, tally.fn = tally.tp + tp, tally.fp + fp, tally.fn + fn


def _score_conditions(
    report: Report, expected: list[list[Any]], got: list[list[Any]], cls: str
) -> bool:
    want, have = Counter(map(_key, expected)), Counter(map(_key, got))
    columns = {c[0] for c in expected} | {c[0] for c in got}
    for column in sorted(columns):
        w = Counter({k: n for k, n in want.items() if json.loads(k)[0] == column})
        h = Counter({k: n for k, n in have.items() if json.loads(k)[0] == column})
        tp = sum((w & h).values())
        _tally(report, column, tp, sum(h.values()) - tp, sum(w.values()) - tp)
    report.wrong_conditions[cls] += sum((have - want).values())
    return want == have


def score(items: Iterable[Mapping[str, Any]], read: Understand | None = None) -> Report:
    """Score ``read(text, table)`` (by default ``understand`` at :data:`NOW`) over ``items``."""

    def default(text: str, table: str | None) -> Understanding:
        return understand(text, table=table, now=NOW)

    read = read or default
    report = Report()
    for item in items:
        expected, cls = item["expected"], item.get("class", "other")
        got = labels(read(item["text"], item.get("table")))
        ok = _score_conditions(report, expected["conditions"], got["conditions"], cls)
        for name in ("table", "count_only", "weak", "include"):
            want, have = expected.get(name) or None, got[name] or None
            hit = want == have
            _tally(report, name, int(hit and want is not None), int(not hit and have is not None),
                   int(not hit and want is not None))  # fmt: skip
            ok = ok and hit
        want_groups, got_groups = expected.get("group_by", []), got["group_by"]
        hit = want_groups == got_groups
        _tally(report, "group_by", int(hit and bool(want_groups)),
               int(not hit and bool(got_groups)), int(not hit and bool(want_groups)))  # fmt: skip
        ok = ok and hit
        matched = ignored_match(expected["ignored"], got["ignored"])
        _tally(report, "ignored", matched, len(got["ignored"]) - matched,
               len(expected["ignored"]) - matched)  # fmt: skip
        ok = ok and matched == len(expected["ignored"]) == len(got["ignored"])
        report.total += 1
        report.exact += ok
        hits = report.classes.setdefault(cls, [0, 0])
        hits[0] += ok
        hits[1] += 1
        if not ok:
            report.misses.append((item["text"], dict(expected), got))
    return report


def table(report: Report) -> str:
    """The report as two Markdown tables: per field, then per class."""
    lines = ["| field | precision | recall | found / expected |", "|---|---|---|---|"]
    for name, tally in sorted(report.fields.items()):
        lines.append(
            f"| {name} | {tally.precision:.3f} | {tally.recall:.3f} "
            f"| {tally.tp + tally.fp} / {tally.tp + tally.fn} |"
        )
    lines += ["", "| class | requests | exact match | wrong conditions |", "|---|---|---|---|"]
    for name in sorted(report.classes):
        hits, total = report.classes[name]
        wrong = report.wrong_conditions[name]
        lines.append(f"| {name} | {total} | {hits / total:.3f} | {wrong} |")
    lines.append(
        f"| **all** | {report.total} | {report.exact_rate:.3f} "
        f"| {sum(report.wrong_conditions.values())} |"
    )
    return "\n".join(lines)


def main() -> None:
    """Print the accuracy tables and every request not understood exactly."""
    report = score(load())
    print(table(report))
    for text, expected, got in report.misses:
        print(f"\nMISS {text!r}\n  expected {json.dumps(expected, ensure_ascii=False)}")
        print(f"  got      {json.dumps(got, ensure_ascii=False)}")


if __name__ == "__main__":
    main()
