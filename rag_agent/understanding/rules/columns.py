"""Rules that read a table's own columns from its :class:`~.lexicon.Lexicon`: category values
(exact word, a word only one value holds, a synonym), their negation, flags, numbers compared
with a column named by its words, and missing values.

Generic language only: comparison words, negation ("not", "isn't", "except", "other than",
"neither … nor", ``un-``/``in-``/``non-`` prefixes), "without"/"missing", "switched off". Which
column and which value come from the lexicon, so the same rules read any schema.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

from persistence import Op
from persistence.vocabulary import SchemaVocabulary, stem
from rag_agent.specs import Condition, Through
from rag_agent.understanding.rules.lexicon import (
    FRAMING_STEMS,
    NEEDS_CUE,
    OFF_WORDS,
    Lexicon,
    ValueSense,
)
from rag_agent.understanding.rules.patterns import first_letter
from rag_agent.understanding.rules.reading import Reading, plural
from rag_agent.understanding.rules.tokens import (
    NEGATING_PREFIXES,
    WORD_RE,
    PhraseIndex,
    Token,
    phrase_at,
    start_stems,
)
from rag_agent.understanding.rules.vocabulary import TABLE_WORDS

__all__ = ["read_columns", "report_other_tables"]

_NEGATORS = frozenset({"not", "no", "non", "never", "except", "excluding", "neither", "nor"})
_NEGATED_PAIRS = frozenset({("other", "than"), ("apart", "from"), ("rather", "than")})
_BRIDGE = frozenset({"is", "are", "was", "were", "the", "a", "an", "of", "in", "as", "that", "be"})
_PREFIXES = NEGATING_PREFIXES
_PREPOSITIONS = frozenset({"on", "over", "via", "through", "from", "by", "with", "at", "for", "to",
                           "into", "under", "any"})  # fmt: skip
_MISSING_BEFORE = frozenset({"without", "missing", "lacking", "no"})
_MISSING_WORDS = _MISSING_BEFORE | {"with", "having"}
_NUMBER = r"(?P<num>\$?\d[\d,]*(?:\.\d+)?)\s*(?P<unit>[kKmM]\b)?"
_CMP = (
    r"(?P<cmp>>=|=>|<=|=<|!=|==|>|<|=|above|over|greater\s+than|more\s+than|higher\s+than|"
    r"at\s+least|no\s+less\s+than|min(?:imum)?(?:\s+of)?|below|under|less\s+than|fewer\s+than|"
    r"lower\s+than|at\s+most|no\s+more\s+than|max(?:imum)?(?:\s+of)?|exactly|equal\s+to|equals)?"
)
_OPS = {
    ">": Op.GT, "above": Op.GT, "over": Op.GT, "greater than": Op.GT, "more than": Op.GT,
    "higher than": Op.GT, ">=": Op.GTE, "=>": Op.GTE, "at least": Op.GTE,
    "no less than": Op.GTE, "min": Op.GTE, "minimum": Op.GTE, "min of": Op.GTE,
    "minimum of": Op.GTE, "<": Op.LT, "below": Op.LT, "under": Op.LT, "less than": Op.LT,
    "fewer than": Op.LT, "lower than": Op.LT, "<=": Op.LTE, "=<": Op.LTE, "at most": Op.LTE,
    "no more than": Op.LTE, "max": Op.LTE, "maximum": Op.LTE, "max of": Op.LTE,
    "maximum of": Op.LTE, "!=": Op.NEQ,
}  # fmt: skip
_TAIL = r"(?:\s*(?P<tail>\+|or\s+(?:more|higher|above|better|over|less|lower|below|fewer|under)))?"
_AFTER_RE = re.compile(
    r"^\s*(?:(?:leads?|contacts?|prospects?|ones)\s+)?(?:(?:is|was|of|:|=)\s*)?(?:between\s+(?P<lo>\d[\d,.]*)\s*(?P<lou>[kKmM])?\s+(?:and|to|-)"
    rf"\s+(?P<hi>\d[\d,.]*)\s*(?P<hiu>[kKmM])?\b|{_CMP}\s*{_NUMBER}(?![\w.-]){_TAIL})",
    re.IGNORECASE,
)
_MINMAX_RE = re.compile(r"\b(?P<word>min(?:imum)?|max(?:imum)?)\s+$", re.IGNORECASE)
_BEFORE_RE = re.compile(rf"{_CMP}\s*{_NUMBER}(?:\s*-)?\s*$", re.IGNORECASE)
_BEFORE_TAIL_RE = re.compile(r"^\s*(?P<tail>\+|or\s+(?:more|higher|less|lower|fewer))", re.I)
_UNITS = {"k": 1000, "m": 1_000_000}
#: Words after a column's name that are not a value of it ("status of", "by status and").
_NOT_A_VALUE = frozenset({
    "of", "and", "or", "by", "for", "is", "in", "with", "to", "the", "a", "an", "per", "quo",
    "breakdown", "column", "field", "value", "values", "change", "changes", "update", "updates",
    "report", "count", "counts", "distribution", "history", "overview", "summary", "are", "was",
})  # fmt: skip
#: Table words never read as a value ("contacts" is no "contacted").
_TABLE_STEMS = frozenset(stem(word) for word in TABLE_WORDS if " " not in word)


def _negated(tokens: Sequence[Token], index: int) -> bool:
    """Whether the phrase at ``tokens[index]`` is negated by the words just before it: past
    bridge words and prepositions, and at most one other word ("not run on linkedin")."""
    look = tokens[max(0, index - 5) : index]
    words = [t.text for t in look]
    others = 0
    for position in range(len(words) - 1, -1, -1):
        word = words[position]
        if word in _NEGATORS or word.endswith(("n't", "n\u2019t")):
            return True
        if position and (words[position - 1], word) in _NEGATED_PAIRS:
            return True
        if word in _BRIDGE or word in _PREPOSITIONS:
            continue
        others += 1
        if others > 1 or word in {"and", "but", "or"}:
            return False  # another content word ends the negation's reach
    return False


def read_columns(reading: Reading, lexicon: Lexicon) -> None:
    """Read category values, flags, numbers and missing values of ``lexicon``'s table."""
    _numbers(reading, lexicon)
    _missing(reading, lexicon)
    _writers(reading, lexicon)
    _values(reading, lexicon)
    _flags(reading, lexicon)


def report_other_tables(reading: Reading, lexicon: Lexicon) -> None:
    """Report what names another table's column or value, never leaving it to be searched
    for as words: "leads from linkedin" on a table with no channel."""
    # Tables the text names come first: "linkedin campaigns" is the campaigns' channel. A value
    # is read through another table only when the text names it and a foreign key joins the two
    # ("leads of software clients"); else it is reported ("find leads from linkedin").
    if len(reading.vocabulary.tables) <= (lexicon.table in reading.vocabulary.tables):
        return  # no other table
    # Words no other table's phrase is read at, whichever the table (found once per state of
    # the words, not once per table), and the stems the others may start with.
    others = reading.triggers_besides(lexicon.table)
    tokens = reading.words.tokens
    candidates = _other_table_words(reading, lexicon, tokens, others)
    if not candidates:
        return  # no word of the text may start a phrase of any other table
    starts = frozenset().union(*(start_stems(tokens[i].text) for i in candidates))
    said = (word.lower() for word in WORD_RE.findall(reading.original))
    named = {TABLE_WORDS[word] for word in said if word in TABLE_WORDS}
    for name in sorted(reading.vocabulary.tables, key=lambda table: table not in named):
        if name == lexicon.table:
            continue
        if reading.words.tokens is not tokens:
            tokens = reading.words.tokens
            candidates = _other_table_words(reading, lexicon, tokens, others)
            starts = frozenset().union(*(start_stems(tokens[i].text) for i in candidates))
        other = reading.lexicon_of(name)
        if other.triggers.isdisjoint(starts):
            continue  # no word of the text may start one of its phrases
        for i in candidates:
            token = tokens[i]
            # The columns whose name or value may be met here; every other one is not.
            met = other.met_at(start_stems(token.text))
            if not met or "\x00" in reading.text[token.start : token.end]:  # claimed meanwhile
                continue
            for column in met:
                if column.is_key:
                    continue
                phrases = other.phrase_index(column.name)
                # A column the table has too is its own ("status" of conversations); its value
                # of another table's is not ("conversations with qualified leads").
                length = 0 if lexicon.has(column.name) else phrase_at(tokens, i, phrases)
                end = i + length
                if length and column.is_numeric:
                    after = _AFTER_RE.match(reading.text[tokens[end - 1].end :][:60])
                    if after is None or not (after["num"] or after["lo"]):
                        continue
                    stop = tokens[end - 1].end + after.end()
                elif length and other.is_category(column.name) and end < len(tokens):
                    if tokens[end].text in _NOT_A_VALUE:
                        continue
                    stop = tokens[end].end
                elif column.is_boolean and not lexicon.has(column.name):
                    flag = _flag_at(tokens, i, phrases)
                    if flag is None:
                        continue
                    flag_value, stop = flag
                    start = _prefix_start(reading.text, token.start)
                    if name in named and related(reading.vocabulary, lexicon.table, name, hops=1):
                        condition = Condition(column.name, Op.EQ, flag_value)
                        text = reading.span(start, stop)
                        reading.through.append(Through(name, condition, text))
                        reading.claim(start, stop)
                        break
                    continue
                elif not length:
                    senses = other.values.get((token.stem,))
                    if not senses or not any(s.exact and s.column == column.name for s in senses):
                        continue
                    if token.stem in NEEDS_CUE and name not in named:
                        continue  # "open lead #5": an everyday word, no other table named
                    stop = token.end
                else:
                    continue
                start = _prefix_start(reading.text, token.start)
                value = _related_value(other, column.name, tokens, i, length)
                if (
                    value is not None
                    and name in named
                    and related(reading.vocabulary, lexicon.table, name, hops=1)
                ):
                    condition = Condition(column.name, Op.EQ, value)
                    reading.through.append(Through(name, condition, reading.span(start, stop)))
                    reading.claim(start, stop)
                else:
                    reason = (
                        f"{token.text!r} is not a {column.name} of {plural(lexicon.table)}"
                        if lexicon.has(column.name)
                        else f"{plural(lexicon.table)} have no {column.name} column"
                    )
                    reading.ignore(start, stop, reason)
                break


# Who wrote a message, said in words: "messages from customers" (incoming), "messages we sent"
# (outgoing); applied where a column holds the value those words mean.
_WRITER = (
    r"\b(?:(?P<in>(?:sent\s+|written\s+|received\s+)?(?:by|from)\s+(?:the\s+|our\s+)?"
    r"(?:customers?|clients?|leads?|prospects?|contacts?|users?))"
    r"|(?P<out>(?:(?:that|which)\s+)?we\s+(?:sent|wrote|send)|(?:sent|written)\s+by\s+us"
    r"|from\s+us|our\s+(?:replies|messages|answers)))\b"
)
# (written by :func:`.patterns.first_letter`: one test of the first letters at each position)
_WRITER_RE = re.compile(first_letter("swrbfto", _WRITER), re.IGNORECASE)


#: The gate of :data:`_WRITER_RE` (see :mod:`.gates`): every match holds one of these whole.
_WRITER_WORDS = frozenset({"by", "from", "we", "our"})


def _other_table_words(
    reading: Reading, lexicon: Lexicon, tokens: Sequence[Token], triggers: frozenset[str]
) -> list[int]:
    """The indexes of ``tokens`` where another table's phrase may be read: one of
    ``triggers`` (every stem another table's phrase starts with) may start there, not after
    "at" ("leads at globex": the company's), not framing, not a table word, not a column of the
    table read, not inside a name ("Acme Logistics LLC") nor in the words naming the table."""
    span = reading.table_span
    return [
        i
        for i, token in enumerate(tokens)
        if not (
            triggers.isdisjoint(start_stems(token.text))
            or (i and tokens[i - 1].text == "at")
            or token.stem in FRAMING_STEMS
            or token.stem in _TABLE_STEMS
            or (token.stem,) in lexicon.names
            or _in_name(reading.original, tokens, i)
            or (span is not None and _inside(token, span))
        )
    ]


_INCOMING, _OUTGOING = stem("incoming"), stem("outgoing")


def _one_column(senses: list[ValueSense] | None) -> bool:
    return bool(senses) and len({s.column for s in senses or ()}) == 1


def _writers(reading: Reading, lexicon: Lexicon) -> None:
    values = lexicon.values
    if not (_one_column(values.get((_INCOMING,))) or _one_column(values.get((_OUTGOING,)))):
        return  # no column of the table holds what either words mean: nothing to read
    for match in reading.finditer(_WRITER_RE, words=_WRITER_WORDS):
        senses = values.get((_INCOMING if match["in"] else _OUTGOING,))
        if senses and len({s.column for s in senses}) == 1:
            reading.add(senses[0].column, Op.EQ, senses[0].value)
            reading.claim(*match.span())


def _in_name(text: str, tokens: Sequence[Token], i: int) -> bool:
    """Whether ``tokens[i]`` is a capitalised word among others (a name: "Acme Logistics").
    A lone capitalised word ("leads in Italy") may still be a value."""

    def capital(j: int) -> bool:
        return 0 <= j < len(tokens) and text[tokens[j].start : tokens[j].end][:1].isupper()

    return capital(i) and (capital(i - 1) or capital(i + 1))


def _flag_at(tokens: Sequence[Token], i: int, phrases: PhraseIndex) -> tuple[bool, int] | None:
    """A flag named at ``tokens[i]``: ("active", end) → True, ("inactive", end) → False."""
    length = phrase_at(tokens, i, phrases)
    if length:
        return not _negated(tokens, i), tokens[i + length - 1].end
    token = tokens[i]
    for prefix in _PREFIXES:
        if not token.text.startswith(prefix):
            continue
        rest = stem(token.text[len(prefix) :].lstrip("-"))
        if (rest,) in phrases.get(rest, ()):
            return False, token.end
    return None


def _related_value(
    other: Lexicon, column: str, tokens: Sequence[Token], i: int, length: int
) -> object | None:
    """The value of ``column`` the words at ``tokens[i]`` name (a value alone, or the value after
    the column's name), when they name one and are not negated."""
    if _negated(tokens, i):
        return None
    index = i + length if length else i
    senses = other.values.get((tokens[index].stem,)) if index < len(tokens) else None
    chosen = [s for s in senses or () if s.column == column]
    exact = [s for s in chosen if s.exact] or chosen
    return exact[0].value if len(exact) == 1 else None


def related(vocabulary: SchemaVocabulary, start: str, goal: str, hops: int = 2) -> bool:
    """Whether foreign keys lead from ``start`` to ``goal`` in at most ``hops`` steps."""
    frontier, seen = {start}, {start}
    for _ in range(hops):
        following = set()
        for table in frontier:
            words = vocabulary.table(table)
            for relation in words.relations if words is not None else ():
                for other in (relation.parent_table, relation.child_table):
                    if other == goal:
                        return True
                    if other not in seen:
                        seen.add(other)
                        following.add(other)
        frontier = following
    return False


def _prefix_start(text: str, start: int) -> int:
    """Include a preposition just before ("from linkedin", "via email") in a reported span."""
    before = re.search(r"\b(?:from|via|over|through|by|on)\s+$", text[:start], re.I)
    return before.start() if before else start


def _values(reading: Reading, lexicon: Lexicon) -> None:
    tokens = reading.words.tokens
    stems_ = [t.stem for t in tokens]
    starts = lexicon.value_starts
    found: list[tuple[int, int, list[ValueSense], bool]] = []
    i = 0
    while i < len(tokens):
        if stems_[i] in _TABLE_STEMS and tokens[i].text in TABLE_WORDS:
            i += 1
            continue
        if stems_[i] not in starts and not tokens[i].text.startswith(_PREFIXES):
            i += 1  # starts no value's phrase, and holds no negating prefix
            continue
        match = _longest(lexicon, stems_, i)
        negated_by_prefix = False
        if match is None:
            match = _prefixed(lexicon, tokens[i])
            negated_by_prefix = match is not None
            if match is not None:
                match = (1, match[1])
        if match is None:
            i += 1
            continue
        length, senses = match
        senses = [s for s in senses if _spelled(s, tokens[i : i + length])]
        # A word of a subject ("security" of "Security questionnaire") is that subject only
        # right before a table noun ("security inquiries"), never in a sentence ("could not
        # sign in" is no "Sign in again").
        senses = [
            s
            for s in senses
            if s.exact or s.column not in lexicon.role("text") or _noun_after(tokens, i + length)
        ]
        if not senses:
            i += 1
            continue
        if length == 1 and stems_[i] in NEEDS_CUE and not _cued(lexicon, tokens, i, senses):
            i += 1
            continue
        if reading.table_span is not None and _inside(tokens[i], reading.table_span):
            i += length  # "imported leads" names the table, not a value
            continue
        found.append((i, i + length, senses, negated_by_prefix or _negated(tokens, i)))
        i += length
    chosen: dict[tuple[str, bool], list[object]] = {}
    for start, end, senses, negated in found:
        sense_list = _disambiguate(lexicon, tokens, start, end, senses)
        span = (tokens[start].start, tokens[end - 1].end)
        if sense_list is None:
            columns = sorted({s.column for s in senses})
            reason = f"a value of several columns of {plural(lexicon.table)}: {', '.join(columns)}"
            reading.ignore(*span, reason)
            continue
        sense = sense_list
        chosen.setdefault((sense.column, negated), [])
        if sense.value not in chosen[(sense.column, negated)]:
            chosen[(sense.column, negated)].append(sense.value)
        begin = _negation_start(tokens, start) if negated else start
        left = _column_word_before(lexicon, tokens, begin, sense.column)
        right = _column_word_after(lexicon, tokens, end, sense.column)
        reading.claim(tokens[left].start, tokens[right - 1].end)
    _unknown_values(reading, lexicon)
    for (column, negated), values in chosen.items():
        if negated:
            for value in values:
                reading.add(column, Op.NEQ, value)
        elif len(values) == 1:
            reading.add(column, Op.EQ, values[0])
        else:
            reading.add(column, Op.IN, tuple(values))


_CUE_BEFORE = frozenset({"is", "are", "was", "were", "still", "currently", "as", "that", "which",
                         "who", "not", "isn't", "aren't", "only", "neither", "nor", "either",
                         "or", "and"})  # fmt: skip


def _noun_after(tokens: Sequence[Token], index: int) -> bool:
    return index < len(tokens) and tokens[index].text in TABLE_WORDS


def _spelled(sense: ValueSense, tokens: Sequence[Token]) -> bool:
    """A synonym is met only by its own spelling (a plural, a suffix): "run" is not "running"."""
    if sense.synonym is None:
        return True
    written = " ".join(t.text for t in tokens)
    # An inflection, not another word: "held"/"holds" may be "hold", "Holdings" is a name.
    if written.startswith(sense.synonym):
        return written[len(sense.synonym) :] in _INFLECTIONS
    return sense.synonym.startswith(written) and len(written) >= len(sense.synonym) - 1


_INFLECTIONS = frozenset({"", "s", "es", "d", "ed"})


def _cued(lexicon: Lexicon, tokens: Sequence[Token], i: int, senses: list[ValueSense]) -> bool:
    """Whether an everyday word stands where a value does: before a table noun (past other
    values and "or"), or after its column's name or "is"/"are"/"still"."""
    for token in tokens[i + 1 : i + 5]:
        if token.text in TABLE_WORDS or token.text in {"ones", "one"}:
            return True
        if token.text not in {"or", "and"} and not lexicon.values.get((token.stem,)):
            break
    before = tokens[i - 1] if i else None
    if before is None:
        return False
    named = any((before.stem,) in lexicon.column_phrases(s.column) for s in senses)
    return named or before.text in _CUE_BEFORE


def _inside(token: Token, span: tuple[int, int]) -> bool:
    return span[0] <= token.start < span[1]


def _unknown_values(reading: Reading, lexicon: Lexicon) -> None:
    """``status won`` where ``won`` is no value of the column: reported with the values."""
    firsts = lexicon.category_firsts
    if not firsts:
        return  # no category column to name
    tokens = reading.words.tokens
    if firsts.isdisjoint([token.stem for token in tokens]):
        return  # no column's name starts at any word (no index of the words needed)
    at = reading.words.positions
    for column, phrase in lexicon.category_stems:
        if not phrase:
            continue
        for i in at.get(phrase[0], ()):  # only where the column's name may start
            length = len(phrase)
            if tuple(t.stem for t in tokens[i : i + length]) != phrase or i + length >= len(tokens):
                continue
            word = tokens[i + length]
            gap = reading.text[tokens[i + length - 1].end : word.start]
            if gap.strip(" :=") or word.text in _NOT_A_VALUE or not word.text.isalpha():
                continue
            known = ", ".join(str(v) for v in (column.values or ())[:12])
            reason = f"{word.text!r} is not a {column.name} of {plural(lexicon.table)} ({known})"
            reading.ignore(tokens[i].start, word.end, reason)
            return


def _longest(lexicon: Lexicon, stems_: list[str], i: int) -> tuple[int, list[ValueSense]] | None:
    for length in range(min(lexicon.longest, len(stems_) - i), 0, -1):
        senses = lexicon.values.get(tuple(stems_[i : i + length]))
        if senses:
            return length, senses
    return None


def _prefixed(lexicon: Lexicon, token: Token) -> tuple[int, list[ValueSense]] | None:
    """``unresolved``, ``inactive``, ``non-qualified`` written as one word: the value negated."""
    for prefix in _PREFIXES:
        if token.text.startswith(prefix) and len(token.text) > len(prefix) + 3:
            senses = lexicon.values.get((stem(token.text[len(prefix) :].lstrip("-")),))
            exact = [s for s in senses or () if s.exact]
            if exact:
                return 1, exact
    return None


def _disambiguate(
    lexicon: Lexicon, tokens: Sequence[Token], start: int, end: int, senses: list[ValueSense]
) -> ValueSense | None:
    exact = [s for s in senses if s.exact] or senses
    columns = {s.column for s in exact}
    if len(columns) > 1:
        near = {t.stem for t in tokens[max(0, start - 4) : end + 3]}
        named = [s for s in exact if any(set(p) <= near for p in lexicon.column_phrases(s.column))]
        if len({s.column for s in named}) == 1:
            return named[0]
        return None
    return exact[0]


def _negation_start(tokens: Sequence[Token], index: int) -> int:
    start = index
    for position in range(index - 1, max(-1, index - 5), -1):
        word = tokens[position].text
        if word in _NEGATORS or word.endswith(("n't", "n\u2019t")) or word in {"other", "than"}:
            start = position
        elif word not in _BRIDGE:
            break
    return start


def _column_word_before(lexicon: Lexicon, tokens: Sequence[Token], index: int, column: str) -> int:
    for phrase in lexicon.column_phrases(column):
        for gap in range(0, 3):
            begin = index - gap - len(phrase)
            if begin < 0:
                continue
            bridge = tokens[begin + len(phrase) : index]
            if tuple(t.stem for t in tokens[begin : begin + len(phrase)]) == phrase and all(
                t.text in _BRIDGE for t in bridge
            ):
                return begin
    return index


def _column_word_after(lexicon: Lexicon, tokens: Sequence[Token], index: int, column: str) -> int:
    for phrase in lexicon.column_phrases(column):
        if tuple(t.stem for t in tokens[index : index + len(phrase)]) == phrase:
            return index + len(phrase)
    return index


def _flags(reading: Reading, lexicon: Lexicon) -> None:
    tokens = reading.words.tokens
    for column in lexicon.booleans:
        phrases = lexicon.phrase_index(column)
        for i, token in enumerate(tokens):
            if phrases.keys().isdisjoint(start_stems(token.text)) and token.text not in OFF_WORDS:
                continue  # neither the flag's words (prefixed or not) nor an "off" word
            flag = _flag_at(tokens, i, phrases)
            begin = i
            if flag is not None:
                value, end = flag
                if not value and phrase_at(tokens, i, phrases):  # "not active": the "not" too
                    begin = _negation_start(tokens, i)
            elif token.text in OFF_WORDS and _switchable(lexicon, column):
                after = tokens[i + 1] if i + 1 < len(tokens) else None
                if token.text not in {"switched", "turned"}:
                    value, end = False, token.end  # "disabled", "inactive"
                elif after is not None and after.text in {"off", "on"}:
                    value, end = after.text == "on", after.end
                else:
                    continue
            else:
                continue
            reading.add(column, Op.EQ, value)
            reading.claim(tokens[begin].start, end)
            tokens = reading.words.tokens
            break


def _switchable(lexicon: Lexicon, column: str) -> bool:
    """A flag that is on or off ("enabled", "active"): the one that "switched off" means."""
    switches = [c for c in lexicon.booleans if {"enabl", "activ", "on", "live"} & set(
        lexicon.columns[c].stems
    )]  # fmt: skip
    return switches == [column]


def _number(raw: str, unit: str | None) -> int | Decimal | None:
    text = raw.lstrip("$").replace(",", "")
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    value *= _UNITS.get((unit or "").lower(), 1)
    return int(value) if value == value.to_integral_value() else value


def _numbers(reading: Reading, lexicon: Lexicon) -> None:
    said = reading.said
    if said is not None and not said.digits:
        return  # every number compared is written with a digit
    for column in lexicon.numeric:
        phrases = lexicon.phrase_index(column)
        tokens = reading.words.tokens
        for i in reading.words.starts_in(phrases):
            length = phrase_at(tokens, i, phrases)
            if not length:
                continue
            start, end = tokens[i].start, tokens[i + length - 1].end
            after = _AFTER_RE.match(reading.text[end : end + 60])
            if after is not None and after["lo"]:
                low, high = _number(after["lo"], after["lou"]), _number(after["hi"], after["hiu"])
                if low is None or high is None:
                    continue
                reading.add(column, Op.GTE, low)
                reading.add(column, Op.LTE, high)
                reading.claim(start, end + after.end())
            elif after is not None and after["num"]:
                prefix = _MINMAX_RE.search(reading.text[max(0, start - 12) : start])
                begin = start - len(prefix.group()) if prefix else start
                _compare(reading, column, after, begin, end + after.end(), prefix=prefix)
            else:  # a number before the column's words, read only when none follows them
                before = _BEFORE_RE.search(reading.text[max(0, start - 40) : start])
                if before is None or not before["num"]:
                    continue
                tail = _BEFORE_TAIL_RE.match(reading.text[end : end + 20])
                stop = end + (tail.end() if tail else 0)
                _compare(reading, column, before, start - len(before.group()), stop, tail)
            break


def _compare(
    reading: Reading,
    column: str,
    match: re.Match[str],
    start: int,
    end: int,
    tail: re.Match[str] | None = None,
    prefix: re.Match[str] | None = None,
) -> None:
    value = _number(match["num"], match["unit"])
    if value is None:
        return
    word = " ".join((match["cmp"] or (prefix["word"] if prefix else "") or "").lower().split())
    op = _OPS.get(word, Op.EQ)
    tail_text = ((tail["tail"] if tail else None) or match.groupdict().get("tail") or "").lower()
    if tail_text:
        op = Op.GTE if tail_text == "+" or any(
            w in tail_text for w in ("more", "higher", "above", "better", "over")
        ) else Op.LTE  # fmt: skip
    reading.add(column, op, value)
    reading.claim(start, end)


def _missing(reading: Reading, lexicon: Lexicon) -> None:
    """``without a phone`` → ``is_null``; ``with a title`` → ``is_null False``; a column only
    another table has is reported ("campaigns without a phone")."""
    if not reading.says(_MISSING_WORDS):
        return  # none of the words a missing or present column is said with
    tokens = reading.words.tokens
    for i, token in enumerate(tokens):
        pair = i + 1 < len(tokens) and tokens[i + 1].text == "no"
        present = token.text in {"with", "having"} and not pair
        if token.text not in _MISSING_BEFORE and not pair and not present:
            continue
        j = i + (2 if pair else 1)
        while j < len(tokens) and tokens[j].text in {"a", "an", "the", "any"}:
            j += 1
        # Only the columns whose name may start at the word after: no other is met there.
        first = tokens[j].stem if j < len(tokens) else None
        for column in lexicon.named_from(first) if first is not None else ():
            if column.is_key or column.is_boolean:
                continue
            length = phrase_at(tokens, j, lexicon.phrase_index(column.name))
            if not length or (present and not _ends_phrase(reading.text, tokens, j + length)):
                continue
            reading.add(column.name, Op.IS_NULL, not present)
            reading.claim(token.start, tokens[j + length - 1].end)
            return
        if present:
            continue
        for name in reading.vocabulary.tables:
            other = reading.lexicon_of(name)
            for column in other.named_from(first) if first is not None else ():
                if column.is_key or lexicon.has(column.name):
                    continue
                length = phrase_at(tokens, j, other.phrase_index(column.name))
                if length:
                    reason = f"{plural(lexicon.table)} have no {column.name} column"
                    reading.ignore(token.start, tokens[j + length - 1].end, reason)
                    return


def _ends_phrase(text: str, tokens: Sequence[Token], index: int) -> bool:
    """Whether the words after a "with <column>" end it (so no value or number follows)."""
    if index >= len(tokens):
        return True
    gap = text[tokens[index - 1].end : tokens[index].start]
    return any(ch in gap for ch in ",.;!?)") or tokens[index].text in _FOLLOWERS


_FOLLOWERS = frozenset({"and", "or", "but", "who", "that", "which", "where", "from", "at", "in",
                        "on", "for", "since", "before", "after", "created", "sorted", "please",
                        "number", "listed"})  # fmt: skip
