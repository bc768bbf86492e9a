"""Generate the sample dataset the library ships (``rag_agent/data/<table>.json``).

Run from the repository's root to regenerate the shipped files::

    python scripts/generate_sample.py rag_agent/data

The data is generated from a fixed seed (:data:`rag_agent.ops.sample.SAMPLE_SEED`), so every
run writes the same rows; a test checks that the shipped files equal this generator's output.
It is made to show what the retrieval agent does:

- a few thousand ``leads`` over ~100 companies;
- several companies named "Acme …" with legal suffixes (``Acme Inc.``, ``Acme GmbH``,
  ``Acme Holdings Ltd`` …) but none named ``Acme Corp``, so "find leads at Acme Corp" finds
  nothing until the suffix is dropped (the ``shorten_company_suffix`` reformulation);
- one company (``Globex Corporation``) with several hundred leads, more than the summary
  threshold, so a query for it returns a truncated page with a summary;
- realistic gaps (missing phones, titles, scores), as in real CRM data.

Every e-mail address uses the reserved ``.example`` domain and every phone number the fictional
``555-01xx`` range. The library never imports this script: loading the shipped sample is
:func:`rag_agent.ops.sample.load_sample`.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from persistence.schema import TABLE_COLUMNS
from rag_agent.ops.sample import ACME_COMPANIES, LARGE_COMPANY, SAMPLE_SEED, SAMPLE_TABLES

__all__ = ["generate_sample", "write_sample_files"]

Row = dict[str, Any]

_LARGE_COMPANY_LEADS = 320
_LEADS = 3000
_CLIENTS = (
    ("Northwind Traders", "wholesale"),
    ("Blue Harbor Software", "software"),
    ("Cedar & Pine Realty", "real estate"),
    ("Helios Solar", "energy"),
    ("Lumen Health", "healthcare"),
    ("Quarry Logistics", "logistics"),
    ("Redwood Capital", "finance"),
    ("Summit Outdoor", "retail"),
    ("Tidewater Foods", "food & beverage"),
    ("Vantage Security", "security"),
)
_COMPANY_STEMS = (
    "Initech", "Umbrella", "Stark", "Wayne", "Hooli", "Vandelay", "Soylent", "Tyrell", "Cyberdyne",
    "Wonka", "Gringotts", "Monarch", "Oscorp", "Pied Piper", "Dunder Mifflin", "Bluth", "Prestige",
    "Massive Dynamic", "Gekko", "Sterling Cooper", "Kramerica", "Aperture", "Black Mesa",
    "Nakatomi", "Virtucon", "Duff", "Krusty", "Spacely", "Cogswell", "Zorg", "Weyland", "Yutani",
    "Genco", "Rekall", "Omni", "Clampett", "Paper Street", "Ollivander", "Dharma", "Los Pollos",
    "Bubba Gump",
    "Wernham Hogg", "Sirius", "Mooby", "Nuka", "Vault-Tec", "Abstergo", "Tricell", "Shinra",
    "InGen", "Buy n Large", "Fringe", "Octan", "Chotchkies", "Benthic", "Halcyon", "Lacuna",
    "Mom's Friendly", "Planet Express", "Praxis", "Rich Industries", "Sabre", "Strickland Propane",
    "Tessier-Ashpool", "Ultor", "Veidt", "Wolfram & Hart", "Zenith", "Arasaka", "Militech",
    "Kiroshi", "Biotechnica", "Petrochem", "Trauma Team", "Delamain", "Orbital Air", "Tenma",
    "Stonebridge", "Larkspur", "Brightwater", "Ironwood", "Silverline", "Copperfield", "Foxglove",
    "Greyhawk", "Harborview", "Juniper", "Kestrel", "Meadowlark", "Northstar", "Oakridge",
)  # fmt: skip
_SUFFIXES = ("Inc.", "LLC", "Ltd", "GmbH", "Corp.", "S.A.", "plc", "Group", "Co.", "AG", "")
_FIRST = (
    "Ada", "Alan", "Amara", "Ana", "Arjun", "Ben", "Bianca", "Carlos", "Chen", "Chloe", "Dana",
    "David", "Diego", "Elena", "Emeka", "Emma", "Fatima", "Felix", "Grace", "Hana", "Hugo", "Ines",
    "Ivan", "Jamal", "Jana", "Jonas", "Julia", "Kai", "Kenji", "Lara", "Leila", "Liam", "Lucia",
    "Malik", "Maria", "Mateo", "Mei", "Mia", "Nadia", "Noah", "Nora", "Olga", "Omar", "Priya",
    "Rafael", "Rosa", "Sam", "Sara", "Sofia", "Tariq", "Tom", "Uma", "Victor", "Wei", "Yara",
    "Yusuf", "Zoe",
)  # fmt: skip
_LAST = (
    "Abbott", "Adeyemi", "Alvarez", "Andersen", "Bauer", "Becker", "Brennan", "Castro", "Chowdhury",
    "Costa", "Dubois", "Eriksson", "Fischer", "Garcia", "Gupta", "Haddad", "Hansen", "Hoffmann",
    "Ivanova", "Jensen", "Kim", "Kowalski", "Kumar", "Larsen", "Lee", "Lopez", "Martin", "Meyer",
    "Moreau", "Murphy", "Nakamura", "Nguyen", "Novak", "Okafor", "Olsen", "Park", "Patel",
    "Petrov", "Quinn", "Rossi", "Santos", "Schmidt", "Silva", "Singh", "Suzuki", "Tanaka",
    "Thompson", "Usman", "Varga", "Wagner", "Walsh", "Weber", "Wong", "Yilmaz", "Zhang",
)  # fmt: skip
_TITLES = (
    "CEO", "CTO", "CFO", "COO", "VP Sales", "VP Marketing", "Head of Operations",
    "Head of Procurement", "Sales Manager", "Marketing Manager", "Operations Manager",
    "IT Director", "Engineering Manager", "Office Manager", "Founder", "Account Executive",
)  # fmt: skip
_LEAD_STATUSES = ("new", "contacted", "qualified", "unqualified", "customer")
_CAMPAIGN_NAMES = (
    "Spring outreach", "Q3 webinar follow-up", "Trade show leads", "Re-engagement",
    "Product launch", "Partner referrals", "Holiday promo", "Enterprise pilot",
)  # fmt: skip
_STAGING_SOURCES = ("csv_import", "web_form", "linkedin", "trade_show", "referral")
_SUBJECTS = (
    "Pricing question", "Request a demo", "Integration with our CRM", "Contract renewal",
    "Invoice copy", "Security questionnaire", "Onboarding help", "Partnership inquiry",
)  # fmt: skip
_OUTBOUND = (
    "Hi {first}, following up on our conversation about {company}'s plans for this quarter.",
    "Hi {first}, would a 20-minute call next week work to walk through the pilot?",
    "Thanks {first}, I have attached the case study we discussed.",
    "Hi {first}, just checking whether the proposal reached the right people at {company}.",
)
_INBOUND = (
    "Thanks, next Tuesday works for us.",
    "Could you send pricing for 50 seats?",
    "We are reviewing internally and will get back to you.",
    "Please remove me from this list.",
    "Looping in our procurement lead.",
)
_EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class _Company:
    name: str
    domain: str
    weight: float


def _slug(name: str) -> str:
    kept = "".join(ch if ch.isalnum() else "-" for ch in name.lower())
    return "-".join(part for part in kept.split("-") if part)


def _companies(rnd: random.Random) -> list[_Company]:
    companies = [_Company(name, _slug(name) + ".example", 2.5) for name in ACME_COMPANIES]
    for stem in _COMPANY_STEMS:
        suffix = rnd.choice(_SUFFIXES)
        name = f"{stem} {suffix}".strip()
        companies.append(_Company(name, _slug(name) + ".example", rnd.uniform(0.5, 4.0)))
    return companies


def _at(rnd: random.Random, start_days: int, span_days: int) -> str:
    moment = _EPOCH + dt.timedelta(
        days=start_days + rnd.randrange(span_days), seconds=rnd.randrange(86_400)
    )
    return moment.isoformat()


def _maybe(rnd: random.Random, probability: float, value: Any) -> Any:
    """``value``, or ``None`` with the given probability: real CRM data has gaps."""
    return None if rnd.random() < probability else value


def generate_sample(seed: int = SAMPLE_SEED) -> dict[str, list[Row]]:
    """Generate the sample dataset: table -> rows with fixed ``id``s, timestamps as ISO 8601 text.

    Deterministic: the same ``seed`` always yields the same rows (on every platform).
    """
    rnd = random.Random(seed)  # noqa: S311  # reproducible sample data, not secrets
    data: dict[str, list[Row]] = {table: [] for table in SAMPLE_TABLES}

    for cid, (name, industry) in enumerate(_CLIENTS, start=1):
        data["clients"].append(
            {"id": cid, "name": name, "industry": industry, "created_at": _at(rnd, 0, 60)}
        )
    campaigns_by_client: dict[int, list[int]] = {}
    for client in data["clients"]:
        for name in rnd.sample(_CAMPAIGN_NAMES, 3):
            camp_id = len(data["campaigns"]) + 1
            campaigns_by_client.setdefault(client["id"], []).append(camp_id)
            data["campaigns"].append(
                {
                    "id": camp_id,
                    "client_id": client["id"],
                    "name": name,
                    "status": rnd.choice(("active", "active", "paused", "completed")),
                    "channel": rnd.choice(("email", "linkedin", "phone")),
                    "started_at": _at(rnd, 60, 120),
                }
            )
    for campaign in data["campaigns"]:
        for step in (1, 2):
            data["sequences"].append(
                {
                    "id": len(data["sequences"]) + 1,
                    "campaign_id": campaign["id"],
                    "name": f"{campaign['name']} - sequence {step}",
                    "step_count": rnd.randint(2, 7),
                    "created_at": _at(rnd, 90, 120),
                }
            )

    companies = _companies(rnd)
    large = _Company(LARGE_COMPANY, "globex.example", 0.0)
    picks = [large] * _LARGE_COMPANY_LEADS + rnd.choices(
        companies, weights=[c.weight for c in companies], k=_LEADS - _LARGE_COMPANY_LEADS
    )
    rnd.shuffle(picks)
    seen_emails: set[str] = set()
    for company in picks:
        first, last = rnd.choice(_FIRST), rnd.choice(_LAST)
        local = f"{first}.{last}".lower()
        email = f"{local}@{company.domain}"
        while email in seen_emails:
            email = f"{local}{rnd.randint(2, 99)}@{company.domain}"
        seen_emails.add(email)
        client_id = rnd.randint(1, len(_CLIENTS))
        data["leads"].append(
            {
                "id": len(data["leads"]) + 1,
                "client_id": client_id,
                "campaign_id": _maybe(rnd, 0.1, rnd.choice(campaigns_by_client[client_id])),
                "email": email,
                "first_name": first,
                "last_name": last,
                "company_name": company.name,
                "title": _maybe(rnd, 0.12, rnd.choice(_TITLES)),
                "phone": _maybe(rnd, 0.3, f"+1-202-555-01{rnd.randrange(100):02d}"),
                "status": _maybe(rnd, 0.05, rnd.choice(_LEAD_STATUSES)),
                "score": _maybe(rnd, 0.15, rnd.randint(0, 100)),
                "created_at": _at(rnd, 120, 480),
            }
        )

    for _ in range(400):
        company = rnd.choice(companies)
        first, last = rnd.choice(_FIRST), rnd.choice(_LAST)
        data["staging_leads"].append(
            {
                "id": len(data["staging_leads"]) + 1,
                "client_id": rnd.randint(1, len(_CLIENTS)),
                "email": _maybe(rnd, 0.1, f"{first}.{last}@{company.domain}".lower()),
                "company_name": company.name,
                "source": rnd.choice(_STAGING_SOURCES),
                "imported_at": _at(rnd, 500, 100),
            }
        )

    for lead in rnd.sample(data["leads"], 1000):
        conv_id = len(data["conversations"]) + 1
        data["conversations"].append(
            {
                "id": conv_id,
                "lead_id": lead["id"],
                "channel": rnd.choice(("email", "email", "linkedin", "phone")),
                "status": rnd.choice(("open", "open", "waiting", "closed")),
                "started_at": _at(rnd, 200, 400),
            }
        )
        start = dt.datetime.fromisoformat(data["conversations"][-1]["started_at"])
        for turn in range(rnd.randint(1, 4)):
            outbound = turn % 2 == 0
            template = rnd.choice(_OUTBOUND if outbound else _INBOUND)
            body = template.format(first=lead["first_name"], company=lead["company_name"])
            start += dt.timedelta(hours=rnd.randint(1, 72))
            data["messages"].append(
                {
                    "id": len(data["messages"]) + 1,
                    "conversation_id": conv_id,
                    "direction": "outbound" if outbound else "inbound",
                    "body": body,
                    "sent_at": start.isoformat(),
                }
            )

    for lead in rnd.sample(data["leads"], 300):
        subject = rnd.choice(_SUBJECTS)
        data["inquiries"].append(
            {
                "id": len(data["inquiries"]) + 1,
                "client_id": lead["client_id"],
                "lead_id": lead["id"],
                "subject": subject,
                "body": f"{subject} from {lead['first_name']} at {lead['company_name']}.",
                "received_at": _at(rnd, 300, 300),
            }
        )
    return data


def _encode(table: str, rows: Sequence[Row]) -> str:
    # Compact and column-oriented: a header once, then one JSON array per row and line, so the
    # files stay small, diff well and load without a CSV dialect's type guessing.
    columns = TABLE_COLUMNS[table]
    lines = [json.dumps({"table": table, "columns": list(columns)}, separators=(",", ":"))]
    lines.extend(
        json.dumps([row[c] for c in columns], separators=(",", ":"), ensure_ascii=False)
        for row in rows
    )
    return "\n".join(lines) + "\n"


def write_sample_files(directory: Any, seed: int = SAMPLE_SEED) -> list[str]:
    """Write ``<table>.json`` for every table into ``directory`` (a path); return the names.

    How the shipped package data is regenerated: ``python scripts/generate_sample.py
    rag_agent/data``.
    """
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    names = []
    for table, rows in generate_sample(seed).items():
        (target / f"{table}.json").write_text(_encode(table, rows), encoding="utf-8")
        names.append(f"{table}.json")
    return names


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/generate_sample.py DIRECTORY")
    for written in write_sample_files(sys.argv[1]):
        print(written)
