"""A second test schema, deliberately unlike the bundled sample: its data and its loaders.

The same eight table names as :mod:`persistence.schema`, with other column names, other values,
real PostgreSQL enum types, ``CHECK (... IN (...))`` lists, booleans, ``numeric`` and ``date``
columns, and foreign keys between the tables:

========================  =====================================================================
table                     columns (besides ``id``)
========================  =====================================================================
``clients``               ``name``, ``tier`` (enum ``client_tier``: bronze/silver/gold/platinum),
                          ``industry``, ``region`` (CHECK: EMEA/APAC/AMER), ``is_active``,
                          ``signed_on`` (date)
``campaigns``             ``client_id`` → clients, ``title``, ``state`` (CHECK: draft/live/paused/
                          finished), ``medium`` (CHECK: cold_email/paid_social/field_event/
                          content_syndication), ``launched_on`` (date), ``budget`` (numeric)
``sequences``             ``campaign_id`` → campaigns, ``label``, ``steps``, ``enabled``,
                          ``created_on`` (date)
``leads``                 ``client_id`` → clients, ``campaign_id`` → campaigns, ``first_name``,
                          ``last_name``, ``email``, ``owner_email``, ``company``, ``country``,
                          ``stage`` (enum ``lead_stage``: new/working/nurture/won/lost),
                          ``lead_score`` (numeric), ``source`` (referral/webinar/outbound/
                          website/trade_show), ``is_duplicate``, ``opened_at`` (date)
``staging_leads``         ``client_id`` → clients, ``full_name``, ``contact_email``,
                          ``organisation``, ``origin`` (enum ``import_origin``: csv/api/manual/
                          crm_sync), ``validation`` (CHECK: pending_review/valid/
                          rejected_duplicate/rejected_invalid), ``batch_no``, ``loaded_at``
``conversations``         ``lead_id`` → leads, ``channel`` (CHECK: email/phone/chat),
                          ``resolution`` (enum ``conversation_resolution``: open/resolved/
                          escalated), ``csat`` (1-5), ``opened_at`` (timestamptz)
``messages``              ``conversation_id`` → conversations, ``direction`` (CHECK: in/out),
                          ``is_automated``, ``body``, ``sent_at`` (timestamptz)
``inquiries``             ``lead_id`` → leads, ``client_id`` → clients, ``topic``
                          (billing_dispute/refund_request/api_integration/security_review/
                          onboarding/pricing), ``subject``, ``body``, ``priority`` (enum
                          ``inquiry_priority``: low/normal/high/urgent), ``is_answered``,
                          ``received_at`` (timestamptz)
========================  =====================================================================

:func:`generate` builds the rows from a fixed seed (the same on every platform); every date is
before :data:`NOW` (the clock the question set is read against). :func:`load_memory` writes them
into a :class:`~persistence.MemoryStore` made with :data:`SECOND`'s typed schema
(:func:`memory_store` makes one), :func:`load_postgres` into a PostgreSQL database (the DDL, then
the rows). Both hold the same rows: ``tests/unit/test_schema_questions.py`` reads every table back
from each and compares them.
"""

from __future__ import annotations

import datetime as dt
import functools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from persistence import MemoryStore
from persistence.relations import Relation
from persistence.schema import SchemaVariant
from persistence.values.column_kinds import ColumnType, enum_type

__all__ = [
    "ENUMS",
    "NOW",
    "SECOND",
    "SECOND_SEED",
    "SECOND_TABLES",
    "SecondSchema",
    "generate",
    "load_memory",
    "load_postgres",
    "memory_store",
    "rows",
]

Row = dict[str, Any]

#: The seed of the shipped question set's data.
SECOND_SEED = 20250917
#: The clock of the question set (a Wednesday); every generated date is before it.
NOW = dt.datetime(2025, 9, 17, 12, 0, tzinfo=dt.UTC)
#: Tables in load order: a row's references are loaded before it.
SECOND_TABLES: tuple[str, ...] = (
    "clients",
    "campaigns",
    "sequences",
    "leads",
    "staging_leads",
    "conversations",
    "messages",
    "inquiries",
)

#: PostgreSQL enum types: name -> labels in declaration order.
ENUMS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "client_tier": ("bronze", "silver", "gold", "platinum"),
        "lead_stage": ("new", "working", "nurture", "won", "lost"),
        "import_origin": ("csv", "api", "manual", "crm_sync"),
        "conversation_resolution": ("open", "resolved", "escalated"),
        "inquiry_priority": ("low", "normal", "high", "urgent"),
    }
)

REGIONS = ("EMEA", "APAC", "AMER")
CAMPAIGN_STATES = ("draft", "live", "paused", "finished")
MEDIUMS = ("cold_email", "paid_social", "field_event", "content_syndication")
CHANNELS = ("email", "phone", "chat")
DIRECTIONS = ("in", "out")
VALIDATIONS = ("pending_review", "valid", "rejected_duplicate", "rejected_invalid")
SOURCES = ("referral", "webinar", "outbound", "website", "trade_show")
TOPICS = (
    "billing_dispute",
    "refund_request",
    "api_integration",
    "security_review",
    "onboarding",
    "pricing",
)


def _in(column: str, values: Sequence[str]) -> str:
    return f"check ({column} in ({', '.join(repr(v) for v in values)}))"


_ID = "bigint generated by default as identity primary key"

_TABLES: dict[str, dict[str, str]] = {
    "clients": {
        "id": _ID,
        "name": "text not null",
        "tier": "client_tier not null",
        "industry": "text not null",
        "region": "text not null " + _in("region", REGIONS),
        "is_active": "boolean not null",
        "signed_on": "date not null",
    },
    "campaigns": {
        "id": _ID,
        "client_id": "bigint not null references clients(id)",
        "title": "text not null",
        "state": "text not null " + _in("state", CAMPAIGN_STATES),
        "medium": "text not null " + _in("medium", MEDIUMS),
        "launched_on": "date null",
        "budget": "numeric(12, 2) not null",
    },
    "sequences": {
        "id": _ID,
        "campaign_id": "bigint not null references campaigns(id)",
        "label": "text not null",
        "steps": "integer not null",
        "enabled": "boolean not null",
        "created_on": "date not null",
    },
    "leads": {
        "id": _ID,
        "client_id": "bigint not null references clients(id)",
        "campaign_id": "bigint null references campaigns(id)",
        "first_name": "text not null",
        "last_name": "text not null",
        "email": "text not null",
        "owner_email": "text not null",
        "company": "text not null",
        "country": "text not null",
        "stage": "lead_stage not null",
        "lead_score": "numeric(4, 1) null",
        "source": "text not null",
        "is_duplicate": "boolean not null",
        "opened_at": "date not null",
    },
    "staging_leads": {
        "id": _ID,
        "client_id": "bigint not null references clients(id)",
        "full_name": "text not null",
        "contact_email": "text null",
        "organisation": "text not null",
        "origin": "import_origin not null",
        "validation": "text not null " + _in("validation", VALIDATIONS),
        "batch_no": "integer not null",
        "loaded_at": "timestamptz not null",
    },
    "conversations": {
        "id": _ID,
        "lead_id": "bigint not null references leads(id)",
        "channel": "text not null " + _in("channel", CHANNELS),
        "resolution": "conversation_resolution not null",
        "csat": "smallint null check (csat between 1 and 5)",
        "opened_at": "timestamptz not null",
    },
    "messages": {
        "id": _ID,
        "conversation_id": "bigint not null references conversations(id)",
        "direction": "text not null " + _in("direction", DIRECTIONS),
        "is_automated": "boolean not null",
        "body": "text not null",
        "sent_at": "timestamptz not null",
    },
    "inquiries": {
        "id": _ID,
        "lead_id": "bigint not null references leads(id)",
        "client_id": "bigint not null references clients(id)",
        "topic": "text not null",
        "subject": "text not null",
        "body": "text not null",
        "priority": "inquiry_priority not null",
        "is_answered": "boolean not null",
        "received_at": "timestamptz not null",
    },
}

#: Which enum type each enum column has.
_ENUM_COLUMNS = {
    ("clients", "tier"): "client_tier",
    ("leads", "stage"): "lead_stage",
    ("staging_leads", "origin"): "import_origin",
    ("conversations", "resolution"): "conversation_resolution",
    ("inquiries", "priority"): "inquiry_priority",
}


@dataclass(frozen=True)
class SecondSchema:
    """A :class:`~persistence.schema.SchemaVariant` plus the enum types its columns use.

    Shaped like one where the tests take a variant: ``ddl`` (table -> ``CREATE TABLE``),
    ``columns``, ``relations`` and :meth:`statements` (the enum types first, then the tables,
    then the indexes), so ``tests.conftest._postgres_database`` builds a database of it.
    ``types`` is what ``MemoryStore(schema=...)`` takes: enum columns as
    :func:`~persistence.values.column_kinds.enum_type` with their labels.
    """

    variant: SchemaVariant
    enums: Mapping[str, tuple[str, ...]]
    enum_columns: Mapping[tuple[str, str], str]
    name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.variant.name)

    @property
    def ddl(self) -> Mapping[str, str]:
        return self.variant.ddl

    @property
    def columns(self) -> Mapping[str, tuple[str, ...]]:
        return self.variant.columns

    @property
    def relations(self) -> tuple[Relation, ...]:
        return self.variant.relations

    @functools.cached_property
    def types(self) -> Mapping[str, Mapping[str, str | ColumnType]]:
        typed: dict[str, dict[str, str | ColumnType]] = {}
        for table, cols in self.variant.types.items():
            typed[table] = {}
            for column, type_name in cols.items():
                enum = self.enum_columns.get((table, column))
                typed[table][column] = (
                    enum_type(enum, self.enums[enum]) if enum is not None else type_name
                )
        return MappingProxyType({t: MappingProxyType(c) for t, c in typed.items()})

    def enum_statements(self) -> tuple[str, ...]:
        return tuple(
            f"CREATE TYPE {name} AS ENUM ({', '.join(repr(label) for label in labels)})"
            for name, labels in self.enums.items()
        )

    def drop_statements(self) -> tuple[str, ...]:
        """Drop the tables (children first) and the enum types, where they exist."""
        return (
            f"DROP TABLE IF EXISTS {', '.join(reversed(SECOND_TABLES))} CASCADE",
            *(f"DROP TYPE IF EXISTS {name}" for name in self.enums),
        )

    def statements(self) -> tuple[str, ...]:
        return (*self.enum_statements(), *self.variant.statements())

    def create_sql(self) -> str:
        return ";\n\n".join(self.statements()) + ";\n"


#: The second schema.
SECOND = SecondSchema(
    SchemaVariant(
        "second",
        {table: _TABLES[table] for table in SECOND_TABLES},
        indexes=("CREATE INDEX IF NOT EXISTS leads_email_idx ON leads (email)",),
    ),
    ENUMS,
    MappingProxyType(_ENUM_COLUMNS),
)

# --- data ---------------------------------------------------------------------------------------

_CLIENT_WORDS = (
    "Alder",
    "Basalt",
    "Cobalt",
    "Driftwood",
    "Ember",
    "Fjord",
    "Granite",
    "Hollis",
    "Indigo",
    "Jasper",
    "Kelvin",
    "Lattice",
    "Marlow",
    "Nimbus",
    "Onyx",
    "Pioneer",
    "Quill",
    "Rowan",
    "Saffron",
    "Thistle",
    "Umber",
    "Verity",
    "Willow",
    "Xenon",
    "Yarrow",
    "Zephyr",
    "Arbor",
    "Beacon",
    "Cascade",
    "Delta",
)
_CLIENT_KINDS = ("Partners", "Holdings", "Group", "Labs", "Works", "Brands")
_INDUSTRIES = (
    "Retail",
    "Healthcare",
    "Financial Services",
    "Manufacturing",
    "Logistics",
    "Education",
    "Media & Entertainment",
    "Software",
)
_COMPANY_FIRST = (
    "Tanager",
    "Brightline",
    "Cormorant",
    "Dovetail",
    "Evergreen",
    "Foxhollow",
    "Goldcrest",
    "Heron",
    "Ironbark",
    "Juniperhill",
    "Kingfisher",
    "Lakeshore",
    "Mossgate",
    "Nightjar",
    "Orchard",
    "Pinecrest",
    "Quayside",
    "Redstart",
    "Sandpiper",
    "Tamarack",
    "Upland",
    "Vireo",
    "Wrenfield",
    "Yellowhammer",
    "Bluebell",
    "Copperbeech",
    "Fernbrook",
    "Hawthorn",
    "Larchmont",
    "Millbrook",
    "Oxbow",
    "Riverbend",
    "Stonechat",
    "Teal",
    "Waxwing",
    "Birchwood",
    "Clearwater",
    "Elmstead",
    "Greenfinch",
    "Hazelnut",
)
_COMPANY_SECOND = (
    "Software",
    "Foods",
    "Analytics",
    "Robotics",
    "Freight",
    "Clinics",
    "Textiles",
    "Media",
    "Energy",
    "Pharma",
    "Studios",
    "Systems",
)
_COMPANY_SUFFIX = ("Ltd", "GmbH", "S.L.", "S.p.A.", "Inc.", "BV", "AB", "")
#: Countries with a weight: some common, some rare, so country questions have varied answers.
_COUNTRIES = (
    ("Germany", 12),
    ("United Kingdom", 11),
    ("United States", 14),
    ("France", 9),
    ("Spain", 8),
    ("Italy", 7),
    ("Netherlands", 6),
    ("Sweden", 4),
    ("Poland", 4),
    ("Canada", 5),
    ("Brazil", 4),
    ("Mexico", 3),
    ("Japan", 4),
    ("India", 5),
    ("Australia", 3),
    ("Singapore", 2),
    ("Ireland", 3),
    ("Portugal", 2),
)
_FIRST = (
    "Aino",
    "Bruno",
    "Camille",
    "Dmitri",
    "Elif",
    "Farah",
    "Giulia",
    "Henrik",
    "Isabel",
    "Javier",
    "Keiko",
    "Lorenzo",
    "Maren",
    "Nikhil",
    "Oksana",
    "Pablo",
    "Quentin",
    "Rania",
    "Stefan",
    "Tamsin",
    "Ulla",
    "Vikram",
    "Wanda",
    "Xavier",
    "Yusuf",
    "Zuzana",
    "Anouk",
    "Bjorn",
    "Carmen",
    "Declan",
    "Esther",
    "Florian",
    "Greta",
    "Hamza",
    "Ingrid",
    "Joaquin",
)
_LAST = (
    "Albers",
    "Bianchi",
    "Carvalho",
    "Dahl",
    "Esposito",
    "Fernandez",
    "Gallagher",
    "Horvath",
    "Ishikawa",
    "Jansen",
    "Kaur",
    "Lindqvist",
    "Moretti",
    "Nowak",
    "Oyelaran",
    "Pereira",
    "Quiroga",
    "Rasmussen",
    "Sato",
    "Toivonen",
    "Urquhart",
    "Vasquez",
    "Wojcik",
    "Yamamoto",
    "Zielinski",
    "Brandt",
    "Colombo",
    "Duarte",
    "Eklund",
    "Fontaine",
)
_OWNERS = (
    "sam.taylor",
    "priya.raman",
    "lucas.moreau",
    "hannah.cole",
    "diego.ramos",
    "mei.lin",
)
OWNER_DOMAIN = "northpeak.example"
_SEQUENCE_LABELS = ("Intro", "Follow-up", "Breakup", "Nurture drip", "Re-engage", "Upsell")
_CAMPAIGN_TITLES = (
    "Spring pipeline push",
    "Summer roadshow",
    "Q4 expansion",
    "CFO roundtable",
    "Partner summit",
    "Year-end renewals",
    "Analyst webinar",
    "New market entry",
    "Customer advocacy",
    "Product tour",
)
_SUBJECTS = {
    "billing_dispute": ("Charged twice this month", "Invoice does not match the contract"),
    "refund_request": ("Refund for unused seats", "Please refund the last payment"),
    "api_integration": ("API rate limits", "Webhook integration failing"),
    "security_review": ("SOC 2 report request", "Security questionnaire attached"),
    "onboarding": ("Kick-off scheduling", "Training for new team members"),
    "pricing": ("Volume discount options", "Quote for 200 seats"),
}
_INBOUND = (
    "Thanks, can we move the call to Thursday?",
    "Forwarding this to our head of operations.",
    "We are comparing two vendors, can you share references?",
    "Not interested at the moment, please check back next quarter.",
    "Could you send over the security documentation?",
)
_OUTBOUND = (
    "Hi {first}, sharing the deck from our session as promised.",
    "Hi {first}, a quick reminder about tomorrow's demo.",
    "Hello {first}, do you have ten minutes this week to discuss {company}'s rollout?",
    "Hi {first}, here is the pricing overview you asked for.",
)
_STAGE_WEIGHTS = (("new", 22), ("working", 30), ("nurture", 18), ("won", 14), ("lost", 16))
_START = dt.date(2023, 1, 2)
_LAST_DAY = dt.date(2025, 9, 12)


def _slug(text: str) -> str:
    kept = "".join(ch if ch.isalnum() else "-" for ch in text.lower())
    return "-".join(part for part in kept.split("-") if part)


def _day(rnd: random.Random, start: dt.date, end: dt.date = _LAST_DAY) -> dt.date:
    return start + dt.timedelta(days=rnd.randrange((end - start).days + 1))


def _moment(rnd: random.Random, start: dt.date, end: dt.date = _LAST_DAY) -> dt.datetime:
    day = _day(rnd, start, end)
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC) + dt.timedelta(
        seconds=rnd.randrange(86_400)
    )


def _weighted(rnd: random.Random, pairs: Sequence[tuple[str, int]]) -> str:
    return rnd.choices([p[0] for p in pairs], weights=[p[1] for p in pairs])[0]


def generate(seed: int = SECOND_SEED) -> dict[str, list[Row]]:
    """Every table's rows (fixed ``id``s; dates as ``date``, times as aware UTC ``datetime``,
    numerics as ``Decimal``). Deterministic for a given ``seed``."""
    rnd = random.Random(seed)  # reproducible test data, not secrets
    data: dict[str, list[Row]] = {table: [] for table in SECOND_TABLES}

    names = rnd.sample([f"{w} {k}" for w in _CLIENT_WORDS for k in _CLIENT_KINDS], 60)
    for cid, name in enumerate(names, start=1):
        data["clients"].append(
            {
                "id": cid,
                "name": name,
                "tier": _weighted(
                    rnd, (("bronze", 35), ("silver", 30), ("gold", 22), ("platinum", 13))
                ),
                "industry": rnd.choice(_INDUSTRIES),
                "region": _weighted(rnd, (("EMEA", 45), ("AMER", 35), ("APAC", 20))),
                "is_active": rnd.random() < 0.8,
                "signed_on": _day(rnd, dt.date(2022, 1, 3), dt.date(2024, 12, 20)),
            }
        )

    campaigns_by_client: dict[int, list[int]] = {}
    for client in data["clients"]:
        for title in rnd.sample(_CAMPAIGN_TITLES, rnd.randint(2, 6)):
            cid = len(data["campaigns"]) + 1
            state = _weighted(rnd, (("draft", 12), ("live", 38), ("paused", 20), ("finished", 30)))
            launched = None if state == "draft" else _day(rnd, dt.date(2024, 1, 8))
            data["campaigns"].append(
                {
                    "id": cid,
                    "client_id": client["id"],
                    "title": title,
                    "state": state,
                    "medium": rnd.choice(MEDIUMS),
                    "launched_on": launched,
                    "budget": Decimal(rnd.randrange(1_500, 60_000, 250)).quantize(Decimal("0.01")),
                }
            )
            campaigns_by_client.setdefault(client["id"], []).append(cid)

    for campaign in data["campaigns"]:
        for label in rnd.sample(_SEQUENCE_LABELS, rnd.randint(1, 3)):
            data["sequences"].append(
                {
                    "id": len(data["sequences"]) + 1,
                    "campaign_id": campaign["id"],
                    "label": f"{campaign['title']} - {label}",
                    "steps": rnd.randint(1, 9),
                    "enabled": rnd.random() < 0.7,
                    "created_on": _day(rnd, dt.date(2024, 1, 8)),
                }
            )

    companies = []
    for first in _COMPANY_FIRST:
        suffix = rnd.choice(_COMPANY_SUFFIX)
        name = f"{first} {rnd.choice(_COMPANY_SECOND)} {suffix}".strip()
        companies.append((name, _slug(name) + ".example", rnd.uniform(0.3, 3.0)))
    emails: set[str] = set()
    client_ids = [c["id"] for c in data["clients"]]
    for _ in range(2500):
        company, domain, _weight = rnd.choices(companies, weights=[c[2] for c in companies])[0]
        first, last = rnd.choice(_FIRST), rnd.choice(_LAST)
        local = f"{first}.{last}".lower()
        email = f"{local}@{domain}"
        while email in emails:
            email = f"{local}{rnd.randint(2, 99)}@{domain}"
        emails.add(email)
        client_id = rnd.choice(client_ids)
        score = None if rnd.random() < 0.1 else Decimal(rnd.randrange(0, 1001)) / 10
        data["leads"].append(
            {
                "id": len(data["leads"]) + 1,
                "client_id": client_id,
                "campaign_id": None
                if rnd.random() < 0.15
                else rnd.choice(campaigns_by_client[client_id]),
                "first_name": first,
                "last_name": last,
                "email": email,
                "owner_email": f"{rnd.choice(_OWNERS)}@{OWNER_DOMAIN}",
                "company": company,
                "country": _weighted(rnd, _COUNTRIES),
                "stage": _weighted(rnd, _STAGE_WEIGHTS),
                "lead_score": score,
                "source": _weighted(
                    rnd,
                    (
                        ("referral", 18),
                        ("webinar", 22),
                        ("outbound", 30),
                        ("website", 22),
                        ("trade_show", 8),
                    ),
                ),
                "is_duplicate": rnd.random() < 0.06,
                "opened_at": _day(rnd, dt.date(2024, 1, 8)),
            }
        )

    for _ in range(400):
        company, domain, _weight = rnd.choice(companies)
        first, last = rnd.choice(_FIRST), rnd.choice(_LAST)
        data["staging_leads"].append(
            {
                "id": len(data["staging_leads"]) + 1,
                "client_id": rnd.choice(client_ids),
                "full_name": f"{first} {last}",
                "contact_email": None
                if rnd.random() < 0.12
                else f"{first}.{last}@{domain}".lower(),
                "organisation": company,
                "origin": _weighted(
                    rnd, (("csv", 40), ("api", 25), ("manual", 15), ("crm_sync", 20))
                ),
                "validation": _weighted(
                    rnd,
                    (
                        ("pending_review", 25),
                        ("valid", 45),
                        ("rejected_duplicate", 15),
                        ("rejected_invalid", 15),
                    ),
                ),
                "batch_no": rnd.randint(100, 140),
                "loaded_at": _moment(rnd, dt.date(2025, 3, 3)),
            }
        )

    leads_by_id = {lead["id"]: lead for lead in data["leads"]}
    for lead in rnd.sample(data["leads"], 1200):
        conv_id = len(data["conversations"]) + 1
        opened = _moment(rnd, max(lead["opened_at"], dt.date(2024, 6, 3)))
        resolution = _weighted(rnd, (("open", 40), ("resolved", 45), ("escalated", 15)))
        data["conversations"].append(
            {
                "id": conv_id,
                "lead_id": lead["id"],
                "channel": _weighted(rnd, (("email", 50), ("phone", 25), ("chat", 25))),
                "resolution": resolution,
                "csat": rnd.randint(1, 5)
                if resolution == "resolved" and rnd.random() < 0.7
                else None,
                "opened_at": opened,
            }
        )
        sent = opened
        for turn in range(rnd.randint(1, 5)):
            outbound = turn % 2 == 0
            sent += dt.timedelta(minutes=rnd.randint(20, 2_000))
            sent = min(sent, dt.datetime(2025, 9, 16, 23, 0, tzinfo=dt.UTC))
            person = leads_by_id[lead["id"]]
            body = (
                rnd.choice(_OUTBOUND).format(first=person["first_name"], company=person["company"])
                if outbound
                else rnd.choice(_INBOUND)
            )
            data["messages"].append(
                {
                    "id": len(data["messages"]) + 1,
                    "conversation_id": conv_id,
                    "direction": "out" if outbound else "in",
                    "is_automated": outbound and rnd.random() < 0.4,
                    "body": body,
                    "sent_at": sent,
                }
            )

    for lead in rnd.sample(data["leads"], 500):
        topic = rnd.choice(TOPICS)
        subject = rnd.choice(_SUBJECTS[topic])
        data["inquiries"].append(
            {
                "id": len(data["inquiries"]) + 1,
                "lead_id": lead["id"],
                "client_id": lead["client_id"],
                "topic": topic,
                "subject": subject,
                "body": f"{subject}. Sent by {lead['first_name']} {lead['last_name']} "
                f"from {lead['company']}.",
                "priority": _weighted(
                    rnd, (("low", 25), ("normal", 45), ("high", 20), ("urgent", 10))
                ),
                "is_answered": rnd.random() < 0.6,
                "received_at": _moment(rnd, max(lead["opened_at"], dt.date(2024, 9, 2))),
            }
        )
    return data


@functools.cache
def _cached() -> dict[str, tuple[Row, ...]]:
    return {table: tuple(rows) for table, rows in generate().items()}


def rows(table: str) -> list[Row]:
    """The rows of ``table`` (new dicts each call)."""
    return [dict(row) for row in _cached()[table]]


def memory_store() -> MemoryStore:
    """An empty store typed with :data:`SECOND`'s columns (enum columns with their labels)."""
    return MemoryStore(schema=SECOND.types)


def load_memory(store: MemoryStore) -> dict[str, int]:
    """Write every table's rows into ``store`` (made by :func:`memory_store`); return the counts.

    Rows are upserted on ``id``: loading twice leaves one copy."""
    loaded = {}
    for table in SECOND_TABLES:
        data = rows(table)
        store.upsert(table, data, "id")
        loaded[table] = len(data)
    return loaded


def load_postgres(dsn: str, *, create: bool = True) -> dict[str, int]:
    """Write every table's rows into the PostgreSQL database at ``dsn``; return the counts.

    With ``create`` (the default) the eight tables and the enum types are dropped where they
    exist and created anew from :data:`SECOND` first; without it, the tables must exist (as a
    test fixture makes them) and are filled as they are.
    """
    import psycopg
    from psycopg import sql

    loaded = {}
    with psycopg.connect(dsn, autocommit=False) as conn:
        if create:
            for statement in (*SECOND.drop_statements(), *SECOND.statements()):
                conn.execute(statement.encode())
        for table in SECOND_TABLES:
            columns = SECOND.columns[table]
            data = rows(table)
            statement = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                sql.Identifier(table),
                sql.SQL(", ").join(map(sql.Identifier, columns)),
                sql.SQL(", ").join(sql.Placeholder() * len(columns)),
            )
            with conn.cursor() as cursor:
                cursor.executemany(statement, [tuple(row[c] for c in columns) for row in data])
            loaded[table] = len(data)
        conn.commit()
    return loaded
