"""The words people use for the eight business tables themselves.

The tables' names are the product's contract (every deployment has the same eight); what their
columns are called and hold is learned from each database
(:class:`~persistence.vocabulary.SchemaVocabulary`, read by
:mod:`rag_agent.understanding.rules.lexicon`), so nothing here names a column or a value.

>>> TABLE_WORDS["accounts"], REFERENCE_WORDS["thread"]
('clients', 'conversations')
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["DEFAULT_TABLE", "REFERENCE_WORDS", "TABLE_WORDS"]

_Words = Mapping[str, str]


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

#: A word naming one row of a table before its id ("client 7") → that table. The column
#: that refers to it is learned from the database's foreign keys.
REFERENCE_WORDS: _Words = MappingProxyType(
    {
        "lead": "leads", "contact": "leads", "prospect": "leads", "client": "clients",
        "account": "clients", "campaign": "campaigns", "conversation": "conversations",
        "thread": "conversations", "message": "messages", "inquiry": "inquiries",
        "enquiry": "inquiries", "sequence": "sequences",
    }
)  # fmt: skip
