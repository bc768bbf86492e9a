"""The test harness itself: a shell's stray variables cannot change what the tests test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_stray_library_variables_do_not_reach_tests() -> None:
    """With junk RAG_*, OPENAI_* and SUPABASE_* variables in the environment, tests that read
    settings still pass: the autouse cleaner removes the variables before every test."""
    env = {
        **os.environ,
        "RAG_MAX_LIMIT": "abc",
        "RAG_DEFAULT_LIMIT": "-1",
        "RAG_CACHE_DISABLED": "maybe",
        "OPENAI_API_KEY": "sk-stray",
        "RAG_POSTGRES_DSN": "postgresql://stray@127.0.0.1:1/none",
        "SUPABASE_URL": "not a url",
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "memory",
         "tests/unit/test_rag_settings.py", "tests/unit/test_rag_agent.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def test_harness_variables_survive_the_cleaner() -> None:
    """The cleaner keeps the harness's own variables (they say where the test services are)."""
    from tests.conftest import _HARNESS_VARIABLES, _LIBRARY_PREFIXES

    assert all(name.startswith(_LIBRARY_PREFIXES) for name in _HARNESS_VARIABLES)
    leftover = [
        name
        for name in os.environ
        if name.upper().startswith(_LIBRARY_PREFIXES) and name not in _HARNESS_VARIABLES
    ]
    assert leftover == []
