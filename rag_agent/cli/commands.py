"""The commands: ask, chat, tables, load, demo, tools."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from rag_agent.cli import connect as connection  # backend_options, looked up at each call
from rag_agent.cli._common import (
    EXIT_OK,
    EXIT_QUERY_ERROR,
    Envelope,
    PromptInterrupted,
    UsageError,
    isatty,
)
from rag_agent.cli.connect import (
    connect,
    create_postgres_tables,
    load_sample_into,
    run_query,
    sample_note,
)
from rag_agent.cli.progress import show_progress
from rag_agent.cli.render import (
    emit,
    error_of,
    exit_code_of,
    failure_line,
    format_grid,
    wants_json,
)
from rag_agent.envelope.assemble import clip
from rag_agent.settings import RAGSettings
from rag_agent.tools import openai_tool_schemas


def cmd_ask(args: argparse.Namespace, out: TextIO, err: TextIO, *, settings: RAGSettings) -> int:
    """Run one query and print its envelope."""
    with connect(args, agent=True, settings=settings) as conn:
        err.write(sample_note(conn, args, settings))
        with show_progress(err):
            envelope = run_query(conn.agent, args.text, args)
    emit(envelope, wants_json(args, out), out, backend=args.backend)
    err.write(failure_line(envelope))
    return exit_code_of(envelope)


_CHAT_HELP = (
    "Type a request, e.g. 'find leads at acme', then follow it up: 'only the qualified ones', "
    "'what about their conversations?', 'the first one'. Commands: next (the next page), "
    "/history, /reset (a new conversation; the cache cleared), /help, /exit (or Ctrl-D)."
)
#: Session commands, typed with or without their slash.
_COMMANDS = frozenset({"help", "history", "reset"})
#: Lines that end a session, as people type them ("bye", "Exit.", "quit!", ":q").
_ENDINGS = frozenset({"exit", "quit", "bye", "goodbye", "q", ":q", "\\q"})


def _ends_session(command: str) -> bool:
    """Whether a line asks to end the session rather than being a request."""
    return command.rstrip(".!") in _ENDINGS or command in {"exit()", "quit()"}


@dataclass
class _Chat:
    """One chat session: the agent and the conversation its requests build on."""

    agent: Any
    args: argparse.Namespace
    conversation: Any

    def command(self, command: str, err: TextIO) -> None:
        """Run a session command: help, history or reset."""
        if command == "history":
            for turn in self.conversation.turns:
                kind = "" if turn.kind == "fresh" else f" [{turn.kind}]"
                err.write(f"{turn.number:3d}  {turn.question}{kind}  -> {turn.summary()}\n")
            if not self.conversation.turns:
                err.write("no question asked yet\n")
        elif command == "reset":
            self.conversation.reset()
            self.agent.cache.clear()
            err.write("a new conversation: history and cache cleared\n")
        else:
            err.write(_CHAT_HELP + "\n")

    def ask(self, text: str) -> Envelope:
        # Until a question is answered, the command line's --table/--offset apply; follow-ups
        # read their table and page from the conversation.
        overrides: dict[str, Any] = {"conversation": self.conversation}
        if self.conversation.last is not None:
            overrides.update(table=None, offset=None)
        return run_query(self.agent, text, self.args, **overrides)


def _line_reader(inp: TextIO, err: TextIO) -> Callable[[], str | None]:
    """A function returning the next line of ``inp`` (``None`` at the end of input).

    On a real terminal it uses ``input()`` with readline (line editing, arrow-key history);
    otherwise it prompts on stderr, or not at all when ``inp`` is not a terminal.
    """
    if inp is sys.stdin and isatty(inp) and isatty(sys.stdout):
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  # enables line editing for input()

        def from_terminal() -> str | None:
            try:
                return input("rag> ")
            except EOFError:
                return None
            except KeyboardInterrupt:
                # input() wrote the prompt on stdout: end its line there, stderr may be elsewhere.
                sys.stdout.write("\n")
                sys.stdout.flush()
                raise PromptInterrupted from None

        return from_terminal
    prompt = isatty(inp)

    def from_stream() -> str | None:
        if prompt:
            err.write("rag> ")
            err.flush()
        line = inp.readline()
        return line or None

    return from_stream


def cmd_chat(
    args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO, *, settings: RAGSettings
) -> int:
    """Read one request per line until end of input; print an envelope for each.

    Exit code: that of the last request that failed (1, or 3 when the backend was unavailable),
    so scripts piping requests notice; 0 when none did.
    """
    as_json = wants_json(args, out)
    read = _line_reader(inp, err)
    failed = EXIT_OK
    with connect(args, agent=True, settings=settings) as conn:
        chat = _Chat(conn.agent, args, conn.agent.conversation())
        err.write(sample_note(conn, args, settings))
        if isatty(inp):
            err.write(_CHAT_HELP + "\n")
        while (line := read()) is not None:
            text = line.strip()
            command = text.lower()
            if not text:
                continue
            if _ends_session(command.removeprefix("/")):
                break
            if command.removeprefix("/") in _COMMANDS:
                chat.command(command.removeprefix("/"), err)
                continue
            if command == "next" and chat.conversation.last is None:
                err.write("nothing to page through yet\n")
                continue
            with show_progress(err):
                envelope = chat.ask(text)
            emit(envelope, as_json, out, backend=args.backend)
            out.flush()
            if error_of(envelope):
                failed = exit_code_of(envelope)
                err.write(failure_line(envelope))
    return failed


def cmd_tables(args: argparse.Namespace, out: TextIO, err: TextIO, *, settings: RAGSettings) -> int:
    """List the allow-listed tables with their columns and row counts."""
    with connect(args, agent=False, settings=settings) as conn:
        err.write(sample_note(conn, args, settings))
        rows = [
            (t, conn.facade.count(t), list(conn.facade.columns(t))) for t in conn.facade.tables()
        ]
    if wants_json(args, out):
        listing = [{"table": t, "rows": n, "columns": c} for t, n, c in rows]
        out.write(json.dumps({"backend": args.backend, "tables": listing}) + "\n")
    else:
        out.write(f"backend: {args.backend}\n")
        out.write(
            format_grid(
                ["table", "rows", "columns"],
                [[t, n, ", ".join(c)] for t, n, c in rows],
                max_cell=None,
            )
            + "\n"
        )
    return EXIT_OK


def cmd_vocabulary(
    args: argparse.Namespace, out: TextIO, err: TextIO, *, settings: RAGSettings
) -> int:
    """Print what the agent learned of the database (``SchemaVocabulary``): per table its
    columns, kinds, references and few-valued columns' values, and what was skipped and why."""
    with connect(args, agent=False, settings=settings) as conn:
        err.write(sample_note(conn, args, settings))
        readable = conn.facade.tables()
        if args.table is not None and args.table not in readable:
            raise UsageError(
                f"{args.table!r} is not a readable table; choose one of: " + ", ".join(readable)
            )
        learned = conn.facade.vocabulary(refresh=True)
    tables = [t for t in learned.tables.values() if args.table in (None, t.name)]
    if wants_json(args, out):
        described = {"backend": args.backend, "tables": [t.to_dict() for t in tables]}
        out.write(json.dumps(described, default=str) + "\n")
        return EXIT_OK
    for table in tables:
        out.write(f"{table.name}\n")
        for column in table.columns.values():
            what = f"  {column.name}  {column.type.name}"
            if column.references is not None:
                what += f"  -> {column.references}"
            if column.values is not None:
                shown = ", ".join(str(v) for v in column.values[:20])
                more = f", … {len(column.values)} in all" if len(column.values) > 20 else ""
                what += f"  values ({column.values_source}): {shown}{more}"
            elif column.skipped is not None:
                what += f"  (values skipped: {column.skipped})"
            out.write(what + "\n")
    return EXIT_OK


def cmd_load(args: argparse.Namespace, out: TextIO, err: TextIO, *, settings: RAGSettings) -> int:
    """Load the sample dataset into PostgreSQL or Supabase."""
    from rag_agent.ops.sample import SAMPLE_TABLES

    if args.backend == "memory":
        raise UsageError(
            "load needs --backend postgres or supabase: the memory backend lives in one process, "
            "and ask/chat/tables/demo load the sample into it themselves"
        )
    options = connection.backend_options(args, settings)
    if args.create_tables:
        if args.backend != "postgres":
            raise UsageError("--create-tables works with --backend postgres only")
        create_postgres_tables(options["dsn"])
    counts = load_sample_into(args.backend, options)
    if wants_json(args, out):
        out.write(json.dumps({"backend": args.backend, "loaded": counts}) + "\n")
    else:
        for table in SAMPLE_TABLES:
            if table in counts:
                out.write(f"{table:<14} {counts[table]:>6} rows\n")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace, out: TextIO, err: TextIO, *, settings: RAGSettings) -> int:
    """Load the sample data into memory and walk through what the agent does."""
    args.backend, args.dsn, args.url, args.empty = "memory", None, None, False
    as_json = bool(args.json)
    with connect(args, agent=True, settings=settings) as conn:
        agent = conn.agent
        if not as_json:
            loaded = conn.loaded or {}
            out.write(
                "Sample data loaded into the memory backend: "
                + ", ".join(f"{n} {t}" for t, n in loaded.items())
                + "\n"
            )
            if getattr(agent, "llm", None) is None:
                out.write(
                    "LLM steps are off (no OPENAI_API_KEY, or RAG_LLM=off): everything below is "
                    "rules, queries and reformulations.\n"
                )
        failed = False
        # The steps marked as a conversation's turns share one, as `rag-agent chat` does.
        conversation = agent.conversation()
        for title, text, options in _demo_steps():
            turn = options.pop("turn", False)
            if turn:
                options["conversation"] = conversation
            envelope = agent.run(text, return_json=True, **options)
            failed = failed or error_of(envelope) is not None
            if as_json:
                out.write(json.dumps({"step": title, "query": text, "envelope": envelope}) + "\n")
                continue
            flags = "".join(f" --{k} {v}" for k, v in options.items() if k != "conversation")
            command = "rag> " + text if turn else f"$ rag-agent ask {json.dumps(text)}{flags}"
            out.write(f"\n== {title}\n{command}\n")
            emit(envelope, False, out, max_rows=5, backend=args.backend)
    if not as_json:
        out.write(
            "\nEvery record carries provenance (source, row_id, row_hash); try "
            '`rag-agent ask "find leads at acme" --json`.\n'
        )
    return EXIT_QUERY_ERROR if failed else EXIT_OK


def _demo_steps() -> list[tuple[str, str, dict[str, Any]]]:
    from rag_agent.ops.sample import sample_rows

    email = next(r["email"] for r in sample_rows("leads") if r["company_name"] == "Acme Inc.")
    return [
        ("Fast path: an e-mail address is parsed by rules, one exact match", f"lead {email}", {}),
        (
            "Fast path: a company name becomes a case-insensitive match",
            "find leads at Acme Inc.",
            {"limit": 5},
        ),
        (
            "Reformulation: no company is called 'Acme Corp', so the suffix is dropped",
            "find leads at Acme Corp",
            {"limit": 5},
        ),
        ("Pagination: page 1 of the Acme leads", "find leads at acme", {"limit": 5, "offset": 0}),
        ("Pagination: page 2, same query", "find leads at acme", {"limit": 5, "offset": 5}),
        (
            "Large result: more matches than the summary threshold, so a summary comes along",
            "find leads at Globex",
            {"limit": 20},
        ),
        (
            "Counting: 'how many' answers the number, not rows",
            "how many qualified leads does client 3 have?",
            {},
        ),
        (
            "Other tables, in plain words: a table, a reference and a status",
            "active campaigns of client 3",
            {"limit": 5},
        ),
        (
            "Dates: a month becomes a range on the table's own date column",
            "inbound messages sent in June 2025",
            {"limit": 3},
        ),
        (
            "Honest answers: what cannot be applied is reported, never guessed",
            "who is the CTO at the logistics company we met in March?",
            {"limit": 3},
        ),
        (
            "A conversation (rag-agent chat): a first question",
            "leads at Globex",
            {"limit": 3, "turn": True},
        ),
        (
            "A follow-up keeps the previous conditions and adds its own",
            "only the qualified ones",
            {"limit": 3, "turn": True},
        ),
        (
            "A follow-up reads the related rows of every lead the previous answer matched",
            "what about their conversations?",
            {"limit": 3, "turn": True},
        ),
        (
            "No filter and no LLM configured: nothing is returned, never a whole table",
            "show me everything",
            {},
        ),
    ]  # fmt: skip


# The end of a description's first sentence ("e.g. " and "i.e. " end none).
_FIRST_SENTENCE = re.compile(r"(?<!e\.g)(?<!i\.e)\.\s")


def cmd_tools(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """List the tools (name and what each does); with --openai, print their schemas."""
    schemas = openai_tool_schemas()
    if args.openai:
        out.write(json.dumps(schemas, indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    # Without a format, what a person wants first is what there is, not an error.
    functions = [schema["function"] for schema in schemas]
    width = max(len(f["name"]) for f in functions)
    for function in functions:
        text = " ".join(str(function.get("description", "")).split())
        summary = _FIRST_SENTENCE.split(text, maxsplit=1)[0].rstrip(".")
        out.write(f"{function['name']:<{width}}  {clip(summary, 100)}\n")
    err.write("rag-agent: --openai prints their JSON schemas (OpenAI function calling)\n")
    return EXIT_OK
