"""The project's own hostile inputs: injection-shaped text written for this library's boundaries.

Every security test iterates these; they need nothing outside the repository. Each family aims at
one boundary the library must hold: SQL string and identifier quoting, comments and statement
stacking, PostgreSQL casts and dollar quoting, LIKE wildcards, PostgREST's filter grammar, JSON
and tsquery syntax, and the text encodings that slip past naive filters. The lines are composed
from small parts: every breakout with every body, the endings taken in turn, so each part is
covered without a hand-kept list of hundreds of strings.

An external corpus (one payload per line in ``*.txt`` files) may add cases: name its folder in
``RAG_TEST_PAYLOAD_CORPUS``. It is read lazily, inside tests, never at import time. NUL bytes and
undecodable text are refused before any backend and have their own cases
(``tests/security/test_hostile_inputs.py``), so they are not mixed in here.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Sequence
from pathlib import Path

#: Environment variable naming a folder of extra payload files (``*.txt``, one per line).
EXTERNAL_CORPUS_VARIABLE = "RAG_TEST_PAYLOAD_CORPUS"

#: Ways out of a quoted literal or an expression context.
BREAKOUTS = ("'", '"', "')", '")', "'))", "`", "\\'", "%'", "*'", ")", "1'", "1", "")
#: What an attacker runs once out.
BODIES = (
    " or 1=1",
    " or 'a'='a",
    " or true",
    " and 1=0 union select null,null,null",
    " union all select usename, passwd from pg_shadow",
    " union select table_name from information_schema.tables",
    "; drop table leads",
    "; delete from leads where true",
    "; update leads set email='x'",
    "; insert into leads(email) values ('x')",
    "; select pg_sleep(5)",
    " and (select pg_sleep(5)) is null",
    " and 1=cast((select version()) as int)",
    "; copy leads to program 'id'",
    "; set role postgres",
    "; grant all on leads to public",
    " or exists(select 1 from pg_roles)",
    " order by 99",
    " group by id having 1=1",
)
#: How the rest of the original statement is silenced.
ENDINGS = ("", "--", " -- ", "#", "/*", ";", "; --")

#: Payloads aimed at one syntax each, outside the breakout grid.
SYNTAX = (
    # PostgreSQL literals, casts, dollar quotes, parameters and identifiers
    "$$; drop table leads; $$", "$tag$ x $tag$", "E'\\x27'", "U&'\\0027'", "'::regclass",
    "1::text", "$1", "?", ":name", '"leads"', 'public."leads"', "leads; --", "pg_catalog.pg_class",
    "current_setting('is_superuser')", "lo_import('/etc/passwd')", "chr(39)||chr(39)",
    # LIKE / ILIKE / regex wildcards
    "%", "_", "%%", "_%_", "\\%", "\\\\", "%' or '%'='", "[a-z]%", "a|b", ".*", "^acme$",
    # PostgREST filter grammar
    "eq.acme", "ilike.*acme*", "or=(id.gt.0)", "and=(id.gt.0,id.lt.9)", "not.is.null",
    "in.(1,2,3)", "id.gt.0)", "acme),id.gt.(0", "&select=*", "?select=email", "*,leads(*)",
    'x")', "a,b", "a.b", "a:b", "(a)", "cs.{a}", "fts.acme", "limit=1000000", "order=id.desc",
    # JSON, full-text and pattern syntax
    '{"$ne": null}', '{"$gt": ""}', "[1,2", "a & b", "a | !b", "a <-> b", ":*", "'a' & 'b'",
    # encodings and look-alikes
    "%27%20or%201%3D1", "%2527", "&#39; or 1=1", "\\u0027 or 1=1", "\u02bc or 1=1",
    "\uff07 or 1=1", "\u2019 or 1=1", "acme\u200b", "\u202eemca", "\ufeffacme",
    "ａｃｍｅ", "аcme", "\r\n", "\t' or 1=1", "%00' or 1=1 --",
)  # fmt: skip


@functools.cache
def own_payloads() -> tuple[str, ...]:
    """Every payload of this project's own set, deterministic order, no duplicates."""
    pairs = itertools.product(BREAKOUTS, BODIES)
    grid = (start + body + end for (start, body), end in zip(pairs, itertools.cycle(ENDINGS)))
    return tuple(dict.fromkeys((*SYNTAX, *grid)))


def external_payloads() -> tuple[str, ...]:
    """The extra corpus named by ``RAG_TEST_PAYLOAD_CORPUS``, or nothing when it is not set."""
    folder = os.environ.get(EXTERNAL_CORPUS_VARIABLE, "").strip()
    if not folder:
        return ()
    path = Path(folder)
    if not path.is_dir():
        raise FileNotFoundError(f"{EXTERNAL_CORPUS_VARIABLE}={folder!r} is not a folder")
    lines: list[str] = []
    for file in sorted(path.glob("*.txt")):
        text = file.read_text(encoding="utf-8", errors="replace")
        lines.extend(line for line in text.splitlines() if line.strip())
    return tuple(lines)


def payload_classes() -> dict[str, frozenset[str]]:
    """Each own payload -> the parts it is made of (``breakout:…``, ``body:…``, ``ending:…``
    for the grid; ``syntax:<index>`` for each line aimed at one syntax)."""
    classes: dict[str, frozenset[str]] = {
        line: frozenset({f"syntax:{index}"}) for index, line in enumerate(SYNTAX)
    }
    pairs = itertools.product(BREAKOUTS, BODIES)
    for (start, body), end in zip(pairs, itertools.cycle(ENDINGS)):
        parts = {f"breakout:{start}", f"body:{body}", f"ending:{end}"}
        line = start + body + end
        classes[line] = classes.get(line, frozenset()) | parts
    return classes


def class_sample(lines: Sequence[str], external_step: int = 20) -> list[str]:
    """A fixed subset of ``lines`` holding every class of payload at least once: each syntax
    line, and grid lines chosen until every breakout, body and ending is among them (the cross
    product is not enumerated); lines of an external corpus, whose classes are unknown, every
    ``external_step``-th. Deterministic: the same lines, in ``lines``' order, on every run."""
    classes = payload_classes()
    known = [line for line in lines if line in classes]
    wanted = set().union(*(classes[line] for line in known)) if known else set()
    chosen: set[str] = set()
    while wanted:
        best = max(known, key=lambda line: (len(classes[line] & wanted), -known.index(line)))
        chosen.add(best)
        wanted -= classes[best]
    unknown = [line for line in lines if line not in classes][::external_step]
    return [line for line in lines if line in chosen or line in unknown]
