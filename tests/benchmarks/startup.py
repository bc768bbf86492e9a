"""Start-up, watched: whole-process timings of the CLI as ratios to a bare interpreter start.

Each contender is a new process, timed from ``Popen`` to its exit (or, for ``mcp``, to the
answer listing its tools), so every import it makes counts:

* ``python -c pass``: the bare interpreter, the unit of every ratio;
* ``rag-agent --help``: the parser alone (it imports nothing beyond the standard library);
* ``rag-agent ask "lead #42" --json``: a whole answer from the bundled sample (settings, the
  memory backend loaded with the sample, the agent, the envelope);
* ``rag-agent mcp``: stdio start-up until ``tools/list`` answers (the MCP SDK, the tools).

Ratios of CPU time (user + system), not seconds, are what the targets judge: other work on the
machine stretches wall time (measured and shown too) far more than the CPU a process spends,
and a heavy import that creeps into ``--help`` shows as a ratio that grows. The processes see
none of the library's variables (the sample answers, no LLM is configured).

``python -m tests.benchmarks.startup [--rounds N]`` prints the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.benchmarks.common import Section, Stats, Target
from tests.benchmarks.report import fmt_stats

__all__ = ["GOALS", "measure", "run", "section", "targets"]

_LIBRARY_PREFIXES = ("RAG_", "SUPABASE_", "OPENAI_")
#: The most each command may cost, in bare interpreter starts (a ratio of medians): about a
#: quarter above what the 2-core development machine measured when they were set (3.1, 63 and
#: 86 times, with a load average of 1 to 2), so that a real regression, an import that grows,
#: misses them and noise does not.
GOALS: Mapping[str, float] = {
    "rag-agent --help": 4.0,
    'rag-agent ask "lead #42" --json (sample)': 80.0,
    "rag-agent mcp (stdio, until tools/list answers)": 110.0,
}
BARE = "python -c pass (bare interpreter)"


def _environment() -> dict[str, str]:
    return {
        name: value
        for name, value in os.environ.items()
        if not name.upper().startswith(_LIBRARY_PREFIXES)
    } | {"RAG_LLM": "off", "PYTHONDONTWRITEBYTECODE": "1"}


def _cli() -> list[str]:
    # The installed console script, as a user runs it; the module otherwise.
    script = Path(sys.executable).with_name("rag-agent")
    return [str(script)] if script.exists() else [sys.executable, "-m", "rag_agent.cli"]


def _run(argv: list[str], env: Mapping[str, str]) -> Callable[[], None]:
    def call() -> None:
        done = subprocess.run(argv, env=env, capture_output=True, check=False, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[-2:]} exited {done.returncode}: {done.stderr[-300:]!r}")

    return call


def _mcp(env: Mapping[str, str]) -> Callable[[], None]:
    """Start ``rag-agent mcp`` on stdio, initialise, list the tools, then close its input."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]  # fmt: skip

    def call() -> None:
        with subprocess.Popen(
            [*_cli(), "mcp"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        ) as process:
            assert process.stdin is not None and process.stdout is not None
            for message in messages:
                process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
            while line := process.stdout.readline():
                answer = json.loads(line)
                if answer.get("id") == 2:
                    if not answer["result"]["tools"]:
                        raise RuntimeError("mcp listed no tool")
                    break
            else:
                raise RuntimeError("mcp ended without listing its tools")
            # Timed until the tools are listed: the server's start-up, not its shutdown.
            process.stdin.close()
            process.wait(timeout=30)

    return call


def measure(rounds: int) -> tuple[dict[str, Stats], dict[str, Stats]]:
    """Each contender ``rounds`` times, interleaved (one warm-up run each: a cold file cache
    is the disk's figure, not the program's): the wall-clock seconds, and the CPU seconds
    (user + system) of the process, which other work on the machine changes far less."""
    env = _environment()
    cli = _cli()
    contenders: dict[str, Callable[[], None]] = {
        BARE: _run([sys.executable, "-c", "pass"], env),
        "rag-agent --help": _run([*cli, "--help"], env),
        'rag-agent ask "lead #42" --json (sample)': _run([*cli, "ask", "lead #42", "--json"], env),
        "rag-agent mcp (stdio, until tools/list answers)": _mcp(env),
    }
    for call in contenders.values():
        call()
    wall: dict[str, list[float]] = {name: [] for name in contenders}
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for index in range(rounds):
        for name in names if index % 2 == 0 else reversed(names):
            before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            contenders[name]()
            wall[name].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return (
        {name: Stats(tuple(values)) for name, values in wall.items()},
        {name: Stats(tuple(values)) for name, values in cpu.items()},
    )


def section(wall: Mapping[str, Stats], cpu: Mapping[str, Stats]) -> Section:
    """The report's table: each command's wall and CPU medians, and its CPU ratio to the bare
    interpreter (the ratio the goals judge)."""
    bare = cpu[BARE].median
    result = Section(
        "Start-up: whole processes vs a bare interpreter",
        "Each command as a new process, from its start to its exit (`mcp`: wall time to the "
        "answer listing its tools over stdio), nothing configured (the bundled sample answers, "
        "no LLM). The ratio is the process's CPU time (user + system) to that of `python -c "
        "pass` in the same run: other work on the machine stretches wall time, CPU time far "
        "less, so a heavy import that creeps in shows whatever the load.",
        ("Command", "Wall, median ± IQR", "Wall p95", "CPU, median", "× bare (CPU)", "Goal"),
    )
    for name, figures in wall.items():
        goal = GOALS.get(name)
        result.rows.append(
            (
                name,
                fmt_stats(figures),
                f"{figures.p95 * 1e3:.0f} ms",
                f"{cpu[name].median * 1e3:.0f} ms",
                f"{cpu[name].median / bare:.1f}×",
                f"≤ {goal:g}×" if goal is not None else "",
            )
        )
    return result


def targets(cpu: Mapping[str, Stats]) -> list[Target]:
    """One target per command: its median CPU time within its goal's ratio to the bare
    interpreter's."""
    bare = cpu[BARE].median
    found = []
    for name, goal in GOALS.items():
        measured = cpu[name].median / bare
        found.append(
            Target(
                f"Start-up: {name}",
                f"≤ {goal:g}× a bare interpreter (CPU)",
                f"{measured:.1f}× ({cpu[name].median * 1e3:.0f} ms CPU; bare {bare * 1e3:.0f} ms)",
                measured <= goal,
                gap=f"{measured - goal:.1f}× a bare interpreter above the goal",
                reason="an import on the start-up path grew: compare `python -X importtime` "
                "of the command with the previous run's",
            )
        )
    return found


def run(rounds: int, results: Any) -> None:
    """The ``make bench`` step (``rounds`` of each command): the section, the targets and the
    raw figures."""
    wall, cpu = measure(rounds)
    results.sections.append(section(wall, cpu))
    results.targets.extend(targets(cpu))
    results.figures["startup"] = {
        name: {"wall": figures.as_dict(), "cpu": cpu[name].as_dict()}
        for name, figures in wall.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    start = time.perf_counter()
    wall, cpu = measure(args.rounds)
    for row in section(wall, cpu).rows:
        print(" | ".join(str(cell) for cell in row))
    for target in targets(cpu):
        print(f"{'met' if target.met else 'MISSED'}: {target.name}: {target.measured}")
    print(f"{time.perf_counter() - start:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
