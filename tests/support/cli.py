"""Running the ``rag-agent`` CLI in-process, as the CLI tests do."""

from __future__ import annotations

import io

from rag_agent.cli import main

__all__ = ["Terminal", "run"]


class Terminal(io.StringIO):
    """A text stream that says it is a terminal, so the CLI renders tables."""

    def isatty(self) -> bool:
        return True


def run(*argv: str, stdin: str | io.StringIO = "", tty: bool = False) -> tuple[int, str, str]:
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    out: io.StringIO = Terminal() if tty else io.StringIO()
    err = io.StringIO()
    source = io.StringIO(stdin) if isinstance(stdin, str) else stdin
    code = main(list(argv), stdin=source, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()
