"""Every content word of a question is applied or reported: the union of the envelope's
``metadata.filters`` (their columns' and values' words), ``metadata.ranking.query`` and
``metadata.ignored`` accounts for every word that is not request framing. Leftover words never
zero an answer: a question whose filters match rows answers them whatever else it says."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from persistence import MemoryStore, create_read_only_facade
from persistence.search.text import FRAMING_WORDS
from persistence.vocabulary import stem
from rag_agent import RAGAgent
from rag_agent.settings import RAGSettings

NOW = dt.datetime(2025, 6, 18, 12, tzinfo=dt.UTC)
VALUES = {"tone": ["amber", "cobalt", "umber"], "region": ["north", "south", "east"]}
#: Words no rule reads and no row holds: they must come back as ranked or reported words.
FILLERS = ["zorblat", "quimby", "flexwit", "grondle", "vashtic", "plimsoll", "tarvex", "orbent"]
_WORD = re.compile(r"[^\W_]+")


def _agent() -> RAGAgent:
    store = MemoryStore(
        schema={"leads": {"id": "bigint", "tone": "text", "region": "text", "note": "text"}}
    )
    rows = [
        {"id": n + 1, "tone": VALUES["tone"][n % 3], "region": VALUES["region"][(n // 3) % 3],
         "note": f"call about the {VALUES['tone'][n % 3]} order"}
        for n in range(30)
    ]  # fmt: skip
    store.insert("leads", rows)
    facade = create_read_only_facade(kind="memory", store=store)
    return RAGAgent(facade, settings=RAGSettings(cache_disabled=True), now=lambda: NOW)


AGENT = _agent()


def _accounted(metadata: dict[str, Any]) -> set[str]:
    words: set[str] = set()
    for applied in metadata.get("filters") or ():
        words.update(_WORD.findall(f"{applied['column']} {applied['value']}".lower()))
    words.update(_WORD.findall(str((metadata.get("ranking") or {}).get("query", "")).lower()))
    for part in metadata.get("ignored") or ():
        words.update(_WORD.findall(part["text"].lower()))
    return {stem(word) for word in words}


@settings(max_examples=40)
@given(
    tone=st.sampled_from(VALUES["tone"]),
    region=st.sampled_from(VALUES["region"]),
    fillers=st.lists(st.sampled_from(FILLERS), min_size=1, max_size=3, unique=True),
    order=st.permutations(["tone", "region", "fillers"]),
)
def test_every_content_word_is_applied_or_reported(
    tone: str, region: str, fillers: list[str], order: list[str]
) -> None:
    parts = {"tone": tone, "region": f"in the {region}", "fillers": " ".join(fillers)}
    text = "leads " + ", ".join(parts[key] for key in order)
    envelope = AGENT.run(text, limit=100, return_json=True)
    metadata = envelope["metadata"]
    framing = {stem(w) for w in FRAMING_WORDS} | {"lead"}
    content = {stem(w) for w in _WORD.findall(text.lower())} - framing
    assert content <= _accounted(metadata), (text, metadata)
    # the filters' rows stand: the leftover words never zero them
    truth = sum(
        1
        for n in range(30)
        if VALUES["tone"][n % 3] == tone and VALUES["region"][(n // 3) % 3] == region
    )
    assert metadata["total_count"] == truth, (text, metadata)
