"""The labelled search queries (``search_queries.jsonl``) and how they are judged.

Each line: ``{"id", "table", "type", "text", "search_text", "filters", "relevant"}``:

* ``text`` is what a caller types (for ``RAGAgent.run``, a whole sentence with its conditions);
  ``search_text`` and ``filters`` (``[column, op, value]``, datetimes as ISO strings) are what
  ``facade.search`` is given: the topical part and the conditions as hard filters;
* ``relevant`` is a rule, never a list picked by looking at results: ``{"topic": T}`` (rows the
  corpus generator wrote on topic T), ``{"contains": S}`` (rows whose text holds the identifier S),
  plus optional ``"where"`` conditions the relevant rows also meet (the same as ``filters``).

Types: ``keyword`` (the rows' own words), ``paraphrase`` (no shared word with any relevant row),
``misleading`` (a decoy word other topics are full of), ``identifier`` (an order number or an
invoice id), ``typo``, ``framed`` (agent phrasing: "customers who want to ..."), ``condition``
(topic plus company, date or direction).

``python -m tests.data.search_queries`` rewrites the file from the material and the seeded corpus;
the test suite checks that the file is what the builder writes.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.data.search_corpus import COMPANIES, Corpus, build
from tests.data.search_query_material import MATERIAL
from tests.data.search_topics import CLOSERS, GENERAL, OPENERS, SLOTS

__all__ = ["QUERIES", "check_paraphrases", "is_relevant", "load", "make_queries", "relevant_ids"]

QUERIES = Path(__file__).resolve().parent / "search_queries.jsonl"
PLURAL = {"inquiries": "inquiries", "messages": "messages"}
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
#: Words no one would call a keyword (for the paraphrase check).
_STOP = frozenset(
    """a an the of to in on for from with about by at as and or is are was were be been it its
    this that these those which who what where when how any all some me my our we you your they
    their them i us not no do does can could would will just out up over before again""".split()  # noqa: SIM905
)
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")  # fmt: skip


def _stem(word: str) -> str:
    word = word.lower().replace("\u2019", "'")
    for suffix in ("ing", "ed", "es", "s", "ly", "y"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_stems(text: str) -> set[str]:
    """The crude stems of ``text``'s words, stop words left out."""
    return {_stem(w) for w in _WORD.findall(text) if w.lower() not in _STOP}


#: Stems of the filler every topic's rows share (greetings, sign-offs, chit-chat): a paraphrase
#: may use them, as they point at no topic.
FILLER = frozenset(
    stem for text in (*OPENERS, *CLOSERS, *GENERAL, *SLOTS["team"]) for stem in content_stems(text)
)


def check_paraphrases(corpus: Corpus, queries: Iterable[Mapping[str, Any]]) -> list[str]:
    """Paraphrase queries sharing a word stem with a relevant row (should be none)."""
    stems: dict[tuple[str, str], set[str]] = {}
    for table, topics in corpus.topics.items():
        by_id = {row["id"]: row for row in corpus.rows[table]}
        for row_id, topic in topics.items():
            stems.setdefault((table, topic), set()).update(
                content_stems(corpus.text(table, by_id[row_id]))
            )
    bad = []
    for query in queries:
        if query["type"] == "paraphrase":
            shared = (content_stems(query["search_text"]) - FILLER) & stems[
                (query["table"], query["relevant"]["topic"])
            ]
            if shared:
                bad.append(f"{query['id']}: {sorted(shared)}")
    return bad


def _typo(text: str, rng: random.Random) -> str:
    """``text`` with its two longest words misspelled (a swap, a drop or a doubled letter)."""
    words = text.split()
    for index in sorted(range(len(words)), key=lambda i: -len(words[i]))[:2]:
        word = words[index]
        if len(word) < 4:
            continue
        at = rng.randrange(1, len(word) - 2)
        edit = rng.choice(("swap", "drop", "double"))
        if edit == "swap":
            word = word[:at] + word[at + 1] + word[at] + word[at + 2 :]
        elif edit == "drop":
            word = word[:at] + word[at + 1 :]
        else:
            word = word[:at] + word[at] + word[at:]
        words[index] = word
    return " ".join(words)


def _month(year: int, month: int) -> tuple[str, str]:
    start = dt.datetime(year, month, 1, tzinfo=dt.UTC)
    end = dt.datetime(year + month // 12, month % 12 + 1, 1, tzinfo=dt.UTC)
    return start.isoformat(), end.isoformat()


def make_queries(corpus: Corpus, seed: int = 7) -> list[dict[str, Any]]:
    """Every labelled query, in a stable order."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []

    def add(
        table: str,
        kind: str,
        text: str,
        relevant: dict[str, Any],
        *,
        search_text: str | None = None,
        filters: list[list[Any]] | None = None,
    ) -> None:
        out.append(
            {
                "id": f"{table[0]}{len(out) + 1:04d}",
                "table": table,
                "type": kind,
                "text": text,
                "search_text": search_text or text,
                "filters": filters or [],
                "relevant": relevant,
            }
        )

    for table in ("inquiries", "messages"):
        for topic, material in MATERIAL.items():
            rule = {"topic": topic}
            for kind in ("keyword", "paraphrase", "misleading"):
                for text in material[kind]:
                    add(table, kind, text, rule)
            for text in material["framed"]:
                add(table, "framed", text.format(rows=PLURAL[table]), rule)
            for text in (*material["keyword"][:2], material["paraphrase"][0]):
                add(table, "typo", _typo(text, rng), rule)
        _identifiers(corpus, table, rng, add)
        _conditions(corpus, table, rng, add)
    return out


def _identifiers(corpus: Corpus, table: str, rng: random.Random, add: Any) -> None:
    found = []
    for row in corpus.rows[table]:
        found.extend(re.findall(r"#\d{5}|INV-\d{4}-\d{4}", corpus.text(table, row)))
    for ident in rng.sample(sorted(set(found)), 20):
        if ident.startswith("#"):
            text = rng.choice((f"order {ident}", f"where is order {ident[1:]}", ident))
        else:
            text = rng.choice((ident, f"invoice {ident}", f"problem with {ident}"))
        add(table, "identifier", text, {"contains": ident.lstrip("#")})


def _conditions(corpus: Corpus, table: str, rng: random.Random, add: Any) -> None:
    topics = sorted(MATERIAL)
    for index, topic in enumerate(topics):
        noun = MATERIAL[topic]["noun"][index % 2]
        year, month = (2024, rng.randrange(3, 13)) if index % 2 else (2025, 1 + index % 5)
        start, end = _month(year, month)
        when = f"{_MONTHS[month - 1]} {year}"
        if table == "inquiries":
            # A company with a few rows on the topic, so the condition has something to find.
            per_client: dict[int, int] = {}
            for row in corpus.rows[table]:
                if corpus.topics[table][row["id"]] == topic:
                    per_client[row["client_id"]] = per_client.get(row["client_id"], 0) + 1
            company_id = rng.choice(sorted(c for c, n in per_client.items() if n >= 4))
            company = COMPANIES[company_id - 1]
            where = [["client_id", "eq", company_id]]
            add(table, "condition", f"inquiries from {company} about {noun}",
                {"topic": topic, "where": where}, search_text=noun, filters=where)  # fmt: skip
            dated = [["received_at", "gte", start], ["received_at", "lt", end]]
            add(table, "condition", f"inquiries about {noun} received in {when}",
                {"topic": topic, "where": dated}, search_text=noun, filters=dated)  # fmt: skip
            since = [["received_at", "gte", "2025-01-01T00:00:00+00:00"]]
            add(table, "condition", f"inquiries about {noun} since January 2025",
                {"topic": topic, "where": since}, search_text=noun, filters=since)  # fmt: skip
        else:
            direction = "inbound" if index % 3 else "outbound"
            label = "from customers" if direction == "inbound" else "we sent"
            where = [["direction", "eq", direction]]
            add(table, "condition", f"messages {label} about {noun}",
                {"topic": topic, "where": where}, search_text=noun, filters=where)  # fmt: skip
            dated = [["sent_at", "gte", start], ["sent_at", "lt", end]]
            add(table, "condition", f"messages about {noun} sent in {when}",
                {"topic": topic, "where": dated}, search_text=noun, filters=dated)  # fmt: skip
            both = [["direction", "eq", "inbound"], ["sent_at", "gte", "2025-01-01T00:00:00+00:00"]]
            add(table, "condition", f"messages from customers about {noun} since January 2025",
                {"topic": topic, "where": both}, search_text=noun, filters=both)  # fmt: skip


def load(path: Path = QUERIES) -> list[dict[str, Any]]:
    """The labelled queries, in file order."""
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _meets(row: Mapping[str, Any], where: Iterable[list[Any]]) -> bool:
    for column, op, value in where:
        have = row[column]
        if isinstance(have, dt.datetime):
            value = dt.datetime.fromisoformat(value)
        ok = {"eq": have == value, "gte": have >= value, "lt": have < value}[op]
        if not ok:
            return False
    return True


def is_relevant(
    corpus: Corpus, table: str, row: Mapping[str, Any], rule: Mapping[str, Any]
) -> bool:
    """Whether ``row`` is relevant to a query whose rule is ``rule``."""
    if "topic" in rule and corpus.topics[table][row["id"]] != rule["topic"]:
        return False
    if "contains" in rule and rule["contains"] not in corpus.text(table, row):
        return False
    return _meets(row, rule.get("where", ()))


def relevant_ids(corpus: Corpus, query: Mapping[str, Any]) -> set[int]:
    """The ids of the rows relevant to ``query``."""
    table = query["table"]
    return {
        row["id"]
        for row in corpus.rows[table]
        if is_relevant(corpus, table, row, query["relevant"])
    }


def main() -> None:
    corpus = build()
    queries = make_queries(corpus)
    bad = check_paraphrases(corpus, queries)
    if bad:
        raise SystemExit("paraphrases sharing words with their rows:\n" + "\n".join(bad))
    empty = [q["id"] for q in queries if not relevant_ids(corpus, q)]
    if empty:
        raise SystemExit(f"queries without a relevant row: {empty}")
    with QUERIES.open("w", encoding="utf-8") as handle:
        for query in queries:
            handle.write(json.dumps(query, ensure_ascii=False) + "\n")
    print(f"{len(queries)} queries written to {QUERIES.name}")


if __name__ == "__main__":
    main()
