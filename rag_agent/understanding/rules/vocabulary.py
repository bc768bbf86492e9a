"""The words people use for each business table, and the columns they mean.

One table of facts per concern, all keyed by table name, so the rule parser holds no word lists
of its own and the docs can print the vocabulary (``docs/understanding.md``):

>>> TABLE_WORDS["accounts"], DATE_COLUMNS["messages"], STATUS_WORDS["campaigns"]["running"]
('clients', 'sent_at', 'active')

Every column named here exists in the reference schema (:mod:`persistence.schema`); a test
checks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "CHANNEL_COLUMNS",
    "CHANNEL_WORDS",
    "COMPANY_COLUMNS",
    "DATE_COLUMNS",
    "DEFAULT_TABLE",
    "DIRECTION_WORDS",
    "GROUP_WORDS",
    "MISSING_WORDS",
    "NAME_COLUMNS",
    "REFERENCE_WORDS",
    "SOURCE_WORDS",
    "STATUS_WORDS",
    "TABLE_WORDS",
    "TEXT_COLUMNS",
]

_Words = Mapping[str, str]


def _frozen(mapping: dict[str, dict[str, str]]) -> Mapping[str, _Words]:
    return MappingProxyType({key: MappingProxyType(value) for key, value in mapping.items()})


#: The table words are read for when the caller gives no table and the text names none.
DEFAULT_TABLE = "leads"

#: A word (lower case, singular and plural) → the table it names.
TABLE_WORDS: _Words = MappingProxyType(
    {
        "lead": "leads",
        "leads": "leads",
        "contact": "leads",
        "contacts": "leads",
        "prospect": "leads",
        "prospects": "leads",
        "people": "leads",
        "campaign": "campaigns",
        "campaigns": "campaigns",
        "sequence": "sequences",
        "sequences": "sequences",
        "cadence": "sequences",
        "cadences": "sequences",
        "staging lead": "staging_leads",
        "staging leads": "staging_leads",
        "staged lead": "staging_leads",
        "staged leads": "staging_leads",
        "staging_leads": "staging_leads",
        "imported lead": "staging_leads",
        "imported leads": "staging_leads",
        "import": "staging_leads",
        "imports": "staging_leads",
        "conversation": "conversations",
        "conversations": "conversations",
        "thread": "conversations",
        "threads": "conversations",
        "message": "messages",
        "messages": "messages",
        "inquiry": "inquiries",
        "inquiries": "inquiries",
        "enquiry": "inquiries",
        "enquiries": "inquiries",
        "client": "clients",
        "clients": "clients",
        "account": "clients",
        "accounts": "clients",
    }
)

#: A word naming one row of a table before its id ("client 7") → (that table, the column
#: other tables reference it by, when any does).
REFERENCE_WORDS: Mapping[str, tuple[str, str | None]] = MappingProxyType(
    {
        "lead": ("leads", "lead_id"),
        "contact": ("leads", "lead_id"),
        "prospect": ("leads", "lead_id"),
        "client": ("clients", "client_id"),
        "account": ("clients", "client_id"),
        "campaign": ("campaigns", "campaign_id"),
        "conversation": ("conversations", "conversation_id"),
        "thread": ("conversations", "conversation_id"),
        "message": ("messages", None),
        "inquiry": ("inquiries", None),
        "enquiry": ("inquiries", None),
        "sequence": ("sequences", None),
    }
)

#: The one date column of each table: relative and absolute dates apply to it.
DATE_COLUMNS: _Words = MappingProxyType(
    {
        "clients": "created_at",
        "campaigns": "started_at",
        "sequences": "created_at",
        "leads": "created_at",
        "staging_leads": "imported_at",
        "conversations": "started_at",
        "messages": "sent_at",
        "inquiries": "received_at",
    }
)

#: The column holding a company's name, on the tables that have one.
COMPANY_COLUMNS: _Words = MappingProxyType(
    {"leads": "company_name", "staging_leads": "company_name", "clients": "name"}
)

#: The column holding a row's own name ("the campaign called Spring outreach").
NAME_COLUMNS: _Words = MappingProxyType(
    {"clients": "name", "campaigns": "name", "sequences": "name"}
)

#: The free-text column "about …" / "mentioning …" searches on the tables that have one.
TEXT_COLUMNS: _Words = MappingProxyType({"inquiries": "subject", "messages": "body"})

#: table → {word: status value}. Only the values of ``rag_agent.ops.sample`` and their synonyms.
STATUS_WORDS: Mapping[str, _Words] = _frozen(
    {
        "leads": {
            "new": "new",
            "contacted": "contacted",
            "qualified": "qualified",
            "unqualified": "unqualified",
            "disqualified": "unqualified",
            "customer": "customer",
            "customers": "customer",
            "converted": "customer",
        },
        "campaigns": {
            "active": "active",
            "running": "active",
            "live": "active",
            "ongoing": "active",
            "paused": "paused",
            "on hold": "paused",
            "completed": "completed",
            "finished": "completed",
            "ended": "completed",
        },
        "conversations": {
            "open": "open",
            "ongoing": "open",
            "active": "open",
            "waiting": "waiting",
            "pending": "waiting",
            "awaiting reply": "waiting",
            "closed": "closed",
            "resolved": "closed",
        },
    }
)

#: The tables with a ``channel`` column.
CHANNEL_COLUMNS: _Words = MappingProxyType({"campaigns": "channel", "conversations": "channel"})
#: A word → channel value.
CHANNEL_WORDS: _Words = MappingProxyType(
    {"email": "email", "e-mail": "email", "linkedin": "linkedin", "phone": "phone"}
)
#: ``messages.direction`` words.
DIRECTION_WORDS: _Words = MappingProxyType(
    {"inbound": "inbound", "incoming": "inbound", "outbound": "outbound", "outgoing": "outbound"}
)
#: ``staging_leads.source`` words.
SOURCE_WORDS: _Words = MappingProxyType(
    {
        "csv": "csv_import",
        "csv import": "csv_import",
        "csv_import": "csv_import",
        "web form": "web_form",
        "web_form": "web_form",
        "linkedin": "linkedin",
        "trade show": "trade_show",
        "trade_show": "trade_show",
        "referral": "referral",
        "referrals": "referral",
    }
)

#: "without a phone" and friends: a word → (the table it applies to, the column).
MISSING_WORDS: Mapping[str, tuple[tuple[str, str], ...]] = MappingProxyType(
    {
        "phone": (("leads", "phone"),),
        "phone number": (("leads", "phone"),),
        "title": (("leads", "title"),),
        "job title": (("leads", "title"),),
        "score": (("leads", "score"),),
        "email": (("leads", "email"), ("staging_leads", "email")),
        "email address": (("leads", "email"), ("staging_leads", "email")),
        "company": (("leads", "company_name"), ("staging_leads", "company_name")),
        "industry": (("clients", "industry"),),
    }
)

#: A word a count may be grouped by ("leads by status", "per campaign") → the column it means.
GROUP_WORDS: _Words = MappingProxyType(
    {
        "status": "status",
        "statuses": "status",
        "stage": "status",
        "stages": "status",
        "campaign": "campaign_id",
        "campaigns": "campaign_id",
        "client": "client_id",
        "clients": "client_id",
        "account": "client_id",
        "accounts": "client_id",
        "channel": "channel",
        "channels": "channel",
        "source": "source",
        "sources": "source",
        "direction": "direction",
        "score": "score",
        "scores": "score",
        "industry": "industry",
        "industries": "industry",
        "title": "title",
        "titles": "title",
        "company": "company_name",
        "companies": "company_name",
        "lead": "lead_id",
        "conversation": "conversation_id",
        "thread": "conversation_id",
    }
)
