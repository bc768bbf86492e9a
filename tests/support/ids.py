"""Parametrised test ids that are the same in every process (a set's order and an object's
address change with the process), so a test is named alike in every run and every worker."""

from __future__ import annotations

import re

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def stable_id(value: object) -> str:
    """``str(value)``, a set's members sorted and memory addresses left out."""
    if isinstance(value, set | frozenset):
        return "{" + ", ".join(sorted(map(repr, value))) + "}"
    return _ADDRESS.sub("", str(value))
