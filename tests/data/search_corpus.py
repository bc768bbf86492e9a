"""A seeded, realistic corpus for measuring search: clients, leads, conversations, ~20k messages
and ~3k inquiries over the topics of :mod:`tests.data.search_topics`, with the topic of every
message and inquiry kept aside as its label.

Generated in code (the same rows for the same seed, on every machine, in about a second), so the
labelled queries of ``search_queries.jsonl`` are judged against rows nobody picked by hand.

>>> corpus = build(messages=200, inquiries=50)
>>> len(corpus.rows["messages"]), len(corpus.rows["inquiries"])
(200, 50)
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.data.search_topics import CLOSERS, GENERAL, OPENERS, REPLIES, SLOTS, TOPICS

__all__ = ["COMPANIES", "Corpus", "build", "load_memory"]

SEED = 20
#: The span every date of the corpus falls in.
START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
END = dt.datetime(2025, 6, 18, tzinfo=dt.UTC)
GENERAL_TOPIC = "general"

COMPANIES = (
    "Acme Logistics", "Globex", "Initech", "Umbrella Health", "Stark Industries", "Wayne Foods",
    "Helios Solar", "Northwind Traders", "Contoso", "Fabrikam", "Tailspin Toys", "Blue Yonder",
    "Vandelay Imports", "Soylent Labs", "Hooli", "Pied Piper", "Massive Dynamic", "Cyberdyne",
    "Oscorp", "Tyrell Systems", "Gringotts Finance", "Duff Beverages", "Monarch Retail",
    "Bluth Homes", "Dunder Paper", "Sterling Cooper", "Prestige Worldwide", "Nakatomi Trading",
    "Wonka Sweets", "Aperture Robotics", "Black Mesa Energy", "Virtucon", "Zorg Manufacturing",
    "Kramerica", "Los Pollos Foods", "Ollivander Crafts", "Rekall Travel", "Spacely Sprockets",
    "Cogswell Cogs", "Yoyodyne",
)  # fmt: skip
INDUSTRIES = ("logistics", "healthcare", "retail", "fintech", "manufacturing", "software", "energy")
LEAD_STATUSES = ("new", "contacted", "qualified", "won", "lost")
CONVERSATION_STATUSES = ("open", "pending", "closed")
FIRST = (
    "Ana",
    "Ben",
    "Chloe",
    "Dev",
    "Eva",
    "Farid",
    "Gina",
    "Hugo",
    "Ines",
    "Jon",
    "Kira",
    "Liam",
)
LAST = ("Meyer", "Novak", "Okafor", "Perez", "Quinn", "Rossi", "Sato", "Tanaka", "Ueda", "Vogel")
_SLOT = re.compile(r"\{(\w+)\}")


@dataclass
class Corpus:
    """``rows[table]``: the rows to load, ids from 1; ``topics[table][id]``: each message's and
    inquiry's topic (``"general"`` for chit-chat on no topic)."""

    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    topics: dict[str, dict[int, str]] = field(default_factory=dict)

    def text(self, table: str, row: Mapping[str, Any]) -> str:
        """The searchable text of a row (subject and body of an inquiry, body of a message)."""
        if table == "inquiries":
            return f"{row['subject']}\n{row['body']}"
        return str(row["body"])


class _Writer:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.serial = 0

    def fill(self, template: str) -> str:
        return _SLOT.sub(lambda match: self._slot(match[1]), template)

    def _slot(self, name: str) -> str:
        self.serial += 1
        if name == "order":
            return f"#{self.rng.randrange(10_000, 99_999)}"
        if name == "invoice":
            return f"INV-{self.rng.choice((2024, 2025))}-{self.rng.randrange(1000, 9999)}"
        return self.rng.choice(SLOTS[name])

    def topical(self, topic: str, *, sentences: int) -> str:
        phrasings = TOPICS[topic][1]
        chosen = self.rng.sample(phrasings, sentences)
        parts = [self.rng.choice(OPENERS), *(self.fill(p) for p in chosen)]
        if self.rng.random() < 0.4:
            parts.append(self.fill(self.rng.choice(GENERAL)))
        parts.append(self.rng.choice(CLOSERS))
        return " ".join(p for p in parts if p)

    def general(self) -> str:
        return " ".join(self.fill(p) for p in self.rng.sample(GENERAL, self.rng.randint(1, 2)))

    def reply(self, topic: str) -> str:
        return self.fill(self.rng.choice(REPLIES[topic]))


def _moment(rng: random.Random) -> dt.datetime:
    seconds = int((END - START).total_seconds())
    return START + dt.timedelta(seconds=rng.randrange(seconds))


def build(
    *, messages: int = 20_000, inquiries: int = 3_000, seed: int = SEED
) -> Corpus:  # fmt: skip
    """The corpus for ``seed``: ``messages`` messages and ``inquiries`` inquiries plus parents."""
    rng = random.Random(seed)
    writer = _Writer(rng)
    topics = sorted(TOPICS)
    corpus = Corpus()
    clients = [
        {"id": i, "name": name, "industry": rng.choice(INDUSTRIES), "created_at": START}
        for i, name in enumerate(COMPANIES, start=1)
    ]
    leads = []
    for i in range(1, 1_501):
        client = rng.choice(clients)
        first, last = rng.choice(FIRST), rng.choice(LAST)
        leads.append(
            {
                "id": i,
                "client_id": client["id"],
                "email": f"{first}.{last}{i}@example.com".lower(),
                "first_name": first,
                "last_name": last,
                "company_name": client["name"],
                "status": rng.choice(LEAD_STATUSES),
                "score": rng.randint(0, 100),
                "created_at": _moment(rng),
            }
        )
    conversations: list[dict[str, Any]] = []
    conversation_topic: dict[int, str] = {}
    message_rows: list[dict[str, Any]] = []
    message_topics: dict[int, str] = {}
    while len(message_rows) < messages:
        conversation_id = len(conversations) + 1
        started = _moment(rng)
        topic = rng.choice(topics)
        conversations.append(
            {
                "id": conversation_id,
                "lead_id": rng.choice(leads)["id"],
                "channel": rng.choice(("email", "chat", "linkedin")),
                "status": rng.choice(CONVERSATION_STATUSES),
                "started_at": started,
            }
        )
        conversation_topic[conversation_id] = topic
        sent = started
        for turn in range(rng.randint(2, 7)):
            if len(message_rows) >= messages:
                break
            inbound = turn % 2 == 0
            roll = rng.random()
            if turn == 0 or (inbound and roll < 0.5):
                body, label = writer.topical(topic, sentences=rng.randint(1, 2)), topic
            elif not inbound and roll < 0.6:
                body, label = writer.reply(topic), topic
            else:
                body, label = writer.general(), GENERAL_TOPIC
            sent += dt.timedelta(minutes=rng.randint(5, 3_000))
            message_id = len(message_rows) + 1
            message_rows.append(
                {
                    "id": message_id,
                    "conversation_id": conversation_id,
                    "direction": "inbound" if inbound else "outbound",
                    "body": body,
                    "sent_at": sent,
                }
            )
            message_topics[message_id] = label
    inquiry_rows = []
    inquiry_topics: dict[int, str] = {}
    for i in range(1, inquiries + 1):
        lead = rng.choice(leads)
        if rng.random() < 0.06:
            subject, body, label = "Quick question", writer.general(), GENERAL_TOPIC
        else:
            label = rng.choice(topics)
            subject = rng.choice(TOPICS[label][0])
            body = writer.topical(label, sentences=rng.randint(1, 3))
        inquiry_rows.append(
            {
                "id": i,
                "client_id": lead["client_id"],
                "lead_id": lead["id"],
                "subject": subject,
                "body": body,
                "received_at": _moment(rng),
            }
        )
        inquiry_topics[i] = label
    corpus.rows = {
        "clients": clients,
        "leads": leads,
        "conversations": conversations,
        "messages": message_rows,
        "inquiries": inquiry_rows,
    }
    corpus.topics = {"messages": message_topics, "inquiries": inquiry_topics}
    return corpus


def load_memory(corpus: Corpus) -> Any:
    """A :class:`~persistence.MemoryStore` holding ``corpus`` (reference schema)."""
    from persistence import MemoryStore

    store = MemoryStore()
    for table in ("clients", "leads", "conversations", "messages", "inquiries"):
        store.insert(table, corpus.rows[table])
    return store
