"""How a question reads against the previous answer: the deterministic follow-up rules.

:func:`read_follow_up` decides, from the words of the question and the last answered turn
alone, what kind of question it is:

* **page** — "next page", "more", "previous page": the previous query, the next window;
* **item** — "the first one", "#3 of that list", "the last one's conversations": one record
  of the previous answer (by its id), or the rows related to it;
* **related** — "what about their conversations?", "and their client?": the rows of the table
  the question names that the foreign keys relate to the rows the previous turn matched;
* **refine** — "only the qualified ones", "and in March?", "not Globex", "how many of them?":
  the previous conditions, plus the new ones (a new condition on a column replaces the previous
  one on it), minus the ones a negation names;
* **fresh** — anything else, a new subject above all ("now campaigns of client 9").

Only English framing words are read here ("their", "only", "next page", ordinals); the tables,
columns and values come from the catalog, the data and the rules, as for any question. What is
left of the question (its markers removed) is read by the rules on the table the follow-up
chose, and the pipeline merges the two (:func:`merge_conditions`).

Thread-safety: pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from persistence import Op
from rag_agent.conversation.history import Kind, Turn
from rag_agent.specs import Condition, Ignored

__all__ = ["FollowUp", "merge_conditions", "read_follow_up"]

_ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "last": -1,
}  # fmt: skip
_ORDINAL_WORD = (
    r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last"
    r"|\d{1,3}(?:st|nd|rd|th))"
)
_GENERIC_NOUNS = r"(?:one|ones|row|result|record|item|entry|match)"

_PAGING = re.compile(
    r"^\s*(?:ok(?:ay)?[,\s]+)?(?:please\s+)?(?:(?:show|give|get|list|load)(?:\s+me)?\s+)?"
    r"(?:the\s+)?(?P<what>next(?:\s+(?:page|ones?|results?|rows?|\d{1,3}))?"
    r"|more(?:\s+(?:results?|rows?|of\s+(?:them|those|these)))?|continue|keep\s+going"
    r"|go\s+on|carry\s+on|page\s+(?P<page>\d{1,3})|go\s+back(?:\s+(?:a|one)\s+page)?"
    r"|previous(?:\s+page)?|prev)\s*(?:please)?\s*[.!?]*\s*$",
    re.IGNORECASE,
)
_ANAPHORA = re.compile(
    r"\b(?:their|theirs|them|they|those|these|its|that\s+one|this\s+one|that\s+list|"
    r"this\s+list|the\s+same|each\s+of\s+them)\b",
    re.IGNORECASE,
)
_REFINE_START = re.compile(
    r"^\s*(?:and|but|also|only|just|plus|then|what\s+about|how\s+about|of\s+(?:those|them|these)"
    r"|among\s+(?:those|them|these)|narrow\s+(?:it|them)\s+to|filter\s+(?:to|by)|same\s+but)\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(
    r"^\s*(?:(?:and|but|now|ok(?:ay)?)[,\s]+)?(?:not|except(?:\s+for)?|excluding|exclude|"
    r"other\s+than|but\s+not|remove|drop|minus|leave\s+out|leaving\s+out|without|skip)\b"
    r"[\s,:]*",
    re.IGNORECASE,
)
_FRESH_START = re.compile(
    r"^\s*(?:now|new\s+question|new\s+search|instead|forget\s+(?:that|it)|start\s+over)\b[\s,.:;-]*",
    re.IGNORECASE,
)
_ASKS_ROWS = re.compile(
    r"\b(?:show|list|which|who|display|give|see|what\s+are|find|get)\b", re.IGNORECASE
)
# Words that only point back at the previous answer: removed before the rules read the rest.
_POINTERS = re.compile(
    r"\b(?:what|how)\s+about\b|\b(?:of|among|from|in)\s+(?:those|them|these|that\s+list|this\s+list)"
    r"|\b(?:their|theirs|them|they|those|these|its|each\s+of\s+them|the\s+same)\b"
    r"|\b(?:only|just|also|plus|then|instead|filters?)\b|^\s*(?:and|but)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class FollowUp:
    """How a question builds on a turn (``turn`` ``None``: it does not).

    ``text`` is what is left for the rules, ``table`` the table they read it on (``None``: the
    one the text names). ``carried`` are the turn's conditions it keeps, ``dropped`` the ones a
    negation took away; ``negate`` says the new conditions are to be excluded. ``selection`` is
    the previous answer's rows a related read starts from (table and conditions), ``offset`` a
    page's window start, ``count_only`` a count carried over, ``topic`` the ranked words carried
    over, and ``ignored`` what could not be resolved.
    """

    kind: Kind = "fresh"
    turn: Turn | None = None
    text: str = ""
    table: str | None = None
    carried: tuple[Condition, ...] = ()
    negate: bool = False
    selection: tuple[str, tuple[Condition, ...]] | None = None
    offset: int | None = None
    limit: int | None = None
    count_only: bool | None = None
    topic: str = ""
    ignored: tuple[Ignored, ...] = ()
    notes: tuple[str, ...] = ()


def read_follow_up(
    text: str, last: Turn | None, named: str | None, tables: Collection[str]
) -> FollowUp:
    """How ``text`` builds on ``last`` (the last answered turn), given the table the rules read
    in the text (``named``, ``None`` when it names none) and the readable ``tables``."""
    if last is None or last.table is None:
        return FollowUp(text=_FRESH_START.sub("", text, count=1))
    paging = _PAGING.match(text)
    if paging is not None:
        return _page(last, paging.group("what").lower(), paging.group("page"))
    fresh_marker = _FRESH_START.match(text) is not None
    item = _ordinal(text, last, tables, named)
    pointing = _ANAPHORA.search(text) is not None or item is not None
    if pointing and (named is None or (item is not None and named == last.table)):
        # "and their client?", "the last lead's conversations": another table's name or
        # singular, which the rules read as the table asked about (or not as a table at all).
        named = _noun_table(text, tables, last.table) or named
    if named is not None and named != last.table:
        if not pointing:
            return FollowUp(text=_FRESH_START.sub("", text, count=1))
        return _related(text, last, named, item)
    if item is not None:
        return _item(text, last, item)
    refining = pointing or _REFINE_START.match(text) or _NEGATION.match(text)
    if fresh_marker or (named is not None and not refining):
        return FollowUp(text=_FRESH_START.sub("", text, count=1))
    return _refine(text, last)


def _carried(turn: Turn) -> tuple[Condition, ...]:
    return tuple(Condition(c.column, Op(c.op), _tuple(c.value), "context") for c in turn.conditions)


def _tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _page(last: Turn, what: str, number: str | None = None) -> FollowUp:
    limit = last.limit or max(1, len(last.ids))
    backwards = what.startswith(("prev", "go back"))
    if number is not None:
        offset = max(0, int(number) - 1) * limit
    else:
        offset = max(0, last.offset - limit) if backwards else last.offset + limit
    ignored: tuple[Ignored, ...] = ()
    if not backwards and offset >= last.total_count:
        ignored = (Ignored(what, "the previous answer was the last page: no more rows match"),)
    return FollowUp(
        kind="page",
        turn=last,
        table=last.table,
        carried=_carried(last),
        offset=offset,
        limit=limit,
        count_only=last.count_only,
        topic=last.topic,
        ignored=ignored,
        notes=(f"offset {offset}",),
    )


def _refine(text: str, last: Turn) -> FollowUp:
    negation = _NEGATION.match(text)
    rest = text[negation.end() :] if negation else text
    rest = _FRESH_START.sub("", rest, count=1)
    stripped = _stripped(rest)
    if _BARE_PERIOD.match(stripped):  # "what about June?" asks for rows in June
        stripped = f"in {stripped}"
    count = last.count_only and _ASKS_ROWS.search(text) is None
    # "the pricing ones" is "the pricing inquiries": the rules read a value before its table's
    # noun as they do in a question of its own.
    noun = (last.table or "").replace("_", " ")
    return FollowUp(
        kind="refine",
        turn=last,
        text=re.sub(r"\bones?\b", noun, stripped, flags=re.IGNORECASE),
        table=last.table,
        carried=_carried(last),
        negate=negation is not None,
        count_only=True if count else None,
        topic=last.topic,
    )


def _related(text: str, last: Turn, named: str, item: int | None) -> FollowUp:
    selection = _selection(last, item)
    if isinstance(selection, Ignored):
        return FollowUp(kind="related", turn=last, table=named, ignored=(selection,))
    rest = _ORDINAL_PHRASE.sub(" ", text) if item is not None else text
    return FollowUp(
        kind="related",
        turn=last,
        text=_stripped(_FRESH_START.sub("", rest, count=1)),
        table=named,
        selection=selection,
    )


def _item(text: str, last: Turn, item: int) -> FollowUp:
    selection = _selection(last, item)
    if isinstance(selection, Ignored):
        return FollowUp(kind="item", turn=last, table=last.table, ignored=(selection,))
    rest = _ORDINAL_PHRASE.sub(" ", text)
    return FollowUp(
        kind="item",
        turn=last,
        text=_stripped(rest),
        table=last.table,
        carried=selection[1],
    )


def _selection(last: Turn, item: int | None) -> tuple[str, tuple[Condition, ...]] | Ignored:
    """The previous answer's rows as conditions on its table: one record's id for an item, the
    turn's conditions otherwise (its records' ids when ranked or found by the fallback: the
    conditions alone would not say which rows it meant)."""
    assert last.table is not None
    if item is not None:
        position = len(last.ids) if item == -1 else item
        if not 1 <= position <= len(last.ids):
            shown = len(last.ids)
            return Ignored(
                f"item {item if item > 0 else 'last'}",
                f"the previous answer shows {shown} record{'s' if shown != 1 else ''}",
            )
        return last.table, (Condition("id", Op.EQ, last.ids[position - 1], "context"),)
    if last.topic or last.fallback or not last.conditions:
        if not last.ids:
            return Ignored("their", "the previous answer has no rows to follow")
        return last.table, (Condition("id", Op.IN, tuple(last.ids), "context"),)
    return last.table, _carried(last)


_ORDINAL_PHRASE = re.compile(
    r"(?:#|\bnumber\s+|\bno\.\s*)(?:\d{1,3}|one|two|three|four|five|six|seven|eight|nine|ten)\b"
    rf"|\b(?:the\s+)?{_ORDINAL_WORD}(?:\s+\w+)?(?:'s)?(?=\W|$)"
    r"|(?:#|\bnumber\s+|\bno\.?\s*|\bitem\s+)\d{1,3}\b(?:\s+(?:of|in|from)\s+(?:that|this|the|those|these)"
    r"(?:\s+(?:list|page|results?|ones?))?)?",
    re.IGNORECASE,
)
_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10,
}  # fmt: skip
_BARE_PERIOD = re.compile(
    r"^(?:january|february|march|april|may|june|july|august|september|october|november"
    r"|december|q[1-4](?:\s+\d{4})?|(?:19|20)\d{2})\b",
    re.IGNORECASE,
)
# "#2", "number four", "no. 3": a position when the question names no table ("lead #2" is an id).
_NUMBER_ALONE = re.compile(
    r"(?:#|\bnumber\s+|\bno\.\s*)(?P<n>\d{1,3}|one|two|three|four|five|six|seven|eight|nine|ten)\b",
    re.IGNORECASE,
)
_ORDINAL_THE = re.compile(
    rf"\bthe\s+(?P<ord>{_ORDINAL_WORD})\s+(?P<noun>\w+)(?:'s)?", re.IGNORECASE
)
_ORDINAL_ALONE = re.compile(rf"\bthe\s+(?P<ord>{_ORDINAL_WORD})(?:'s)?\s*[.!?]*\s*$", re.IGNORECASE)
_NUMBERED = re.compile(
    r"(?:#|\bnumber\s+|\bno\.?\s*|\bitem\s+)(?P<n>\d{1,3})\s+(?:of|in|from)\s+"
    r"(?:that|this|the|those|these)\b",
    re.IGNORECASE,
)


def _ordinal(text: str, last: Turn, tables: Collection[str], named: str | None) -> int | None:
    """The 1-based position ``text`` picks in the previous answer (-1: the last), or ``None``."""
    numbered = _NUMBERED.search(text)
    if numbered is not None:
        return int(numbered.group("n"))
    alone_number = _NUMBER_ALONE.search(text)
    if alone_number is not None and named is None:
        word = alone_number.group("n").lower()
        return _NUMBER_WORDS.get(word) or int(word)
    nouns = _nouns([*tables, last.table or ""])
    found = _ORDINAL_THE.search(text)
    if found is not None and (
        re.fullmatch(_GENERIC_NOUNS, found.group("noun"), re.IGNORECASE)
        or found.group("noun").lower() in nouns
    ):
        return _position(found.group("ord"))
    alone = _ORDINAL_ALONE.search(text)
    return None if alone is None else _position(alone.group("ord"))


def _noun_table(text: str, tables: Collection[str], current: str) -> str | None:
    """The one table other than ``current`` that ``text`` names by its name or singular (the
    whole name first: "leads" is the leads table, not the staging leads), if any."""
    lowered = " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "
    others = [t for t in tables if t != current]
    whole = [t for t in others if any(f" {n} " in lowered for n in _names(t))]
    if len(whole) == 1:
        return whole[0]
    # A word naming the current table ("lead") names no other table that ends with it.
    words = set(lowered.split()) - _nouns([current])
    found = [t for t in others if words & _nouns([t])]
    return found[0] if len(found) == 1 else None


def _names(table: str) -> tuple[str, ...]:
    # "staging_leads" is named "staging leads" or "staging lead".
    name = table.lower().replace("_", " ")
    if name.endswith("ies"):
        return name, name[:-3] + "y"
    return (name, name[:-1]) if name.endswith("s") else (name,)


def _position(word: str) -> int:
    word = word.lower()
    return _ORDINALS[word] if word in _ORDINALS else int(re.sub(r"\D", "", word))


def _nouns(tables: Sequence[str]) -> frozenset[str]:
    # "lead", "leads", "inquiry": the tables' own names and their singulars.
    nouns: set[str] = set()
    for table in tables:
        last_word = table.lower().split("_")[-1]
        nouns.add(last_word)
        if last_word.endswith("ies"):
            nouns.add(last_word[:-3] + "y")
        elif last_word.endswith("s"):
            nouns.add(last_word[:-1])
    return frozenset(nouns - {""})


def _stripped(text: str) -> str:
    return re.sub(r"\s+", " ", _POINTERS.sub(" ", text)).strip(" ,.;:?!")


def merge_conditions(
    follow: FollowUp, new: Sequence[Condition]
) -> tuple[tuple[Condition, ...], tuple[str, ...], tuple[Ignored, ...]]:
    """The conditions a follow-up applies: ``follow.carried`` with ``new`` (a new condition on a
    column replaces the carried ones on it; under a negation each new one removes the carried
    condition it names, or excludes its value), the conditions dropped as phrases, and the
    negations that could not be expressed."""
    if not follow.negate:
        columns = {c.column for c in new}
        kept = tuple(c for c in follow.carried if c.column not in columns)
        dropped = tuple(_phrase(c) for c in follow.carried if c.column in columns)
        return (*kept, *new), dropped, ()
    kept_list = list(follow.carried)
    dropped_list: list[str] = []
    added: list[Condition] = []
    ignored: list[Ignored] = []
    for condition in new:
        named = [c for c in kept_list if c.column == condition.column and _same(c, condition)]
        if named:
            for c in named:
                kept_list.remove(c)
                dropped_list.append(_phrase(c))
        elif condition.op in (Op.EQ, Op.IEQ, Op.ICONTAINS):
            added.append(Condition(condition.column, Op.NEQ, condition.value, condition.source))
            if condition.op is not Op.EQ:
                ignored.append(
                    Ignored(
                        _phrase(condition),
                        f"excluded only the exact value {condition.value!r} (no operator "
                        "excludes a partial match)",
                    )
                )
        else:
            ignored.append(
                Ignored(_phrase(condition), "only an exact value can be excluded, not a match")
            )
    return (*kept_list, *added), tuple(dropped_list), tuple(ignored)


def _same(carried: Condition, new: Condition) -> bool:
    """Whether a negated condition names a carried one: the same column and the same value,
    ignoring case, or a value one contains (``"Globex"`` names ``icontains "globex inc"``)."""
    a, b = carried.value, new.value
    if isinstance(a, str) and isinstance(b, str):
        a, b = a.casefold(), b.casefold()
        return a == b or a in b or b in a
    if isinstance(a, tuple):
        return b in a or (isinstance(b, tuple) and bool(set(a) & set(b)))
    return bool(a == b)


def _phrase(condition: Condition) -> str:
    value = list(condition.value) if isinstance(condition.value, tuple) else condition.value
    return f"{condition.column} {Op(condition.op).value} {value!r}"
