"""Running the ``rag-agent`` CLI in-process, as the CLI tests do."""

from __future__ import annotations

import io

from rag_agent.cli import main

__all__ = ["Terminal", "run", "without_dsn_warning"]


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


def without_dsn_warning(err: str) -> str:
    """``err`` without the warning a ``--dsn`` holding a password gets (the tests' DSNs carry
    their roles' passwords; the warning itself is tested on its own)."""
    return "".join(
        line
        for line in err.splitlines(keepends=True)
        if not line.startswith("rag-agent: warning: --dsn holds a password")
    )
