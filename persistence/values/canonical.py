"""The canonical JSON form of row values, shared by provenance hashes and redaction commitments.

Dates, datetimes and times are ``isoformat()``, UUIDs and Decimals ``str``, bytes hex, the
non-finite floats the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (as ``str(Decimal)`` and
PostgreSQL write them; JSON has no number for them), mappings and sequences element by element,
sets sorted. :func:`canonical_json` writes a value in that form as the UTF-8 bytes every hash of
the library is taken over (sorted keys, no spaces, non-ASCII kept).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import uuid
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["canonical_json", "canonical_value", "non_finite_text"]

_SCALARS = (str, int, bool, type(None))


def non_finite_text(value: float) -> str:
    """``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` for a non-finite float."""
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


_PLAIN = frozenset({str, int, bool, type(None)})


def canonical_value(value: Any) -> Any:
    """The JSON form of one field value, as the hash and the JSON envelope both see it."""
    if type(value) in _PLAIN or isinstance(value, _SCALARS):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else non_finite_text(value)
    if isinstance(value, dt.date | dt.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, uuid.UUID | decimal.Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): canonical_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [canonical_value(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return str(value)


# orjson writes these exactly as the json.dumps path below writes their canonical form (a
# property test holds it to that), several times faster. Floats are not among them (orjson
# spells 1e16 where json writes 1e+16); a datetime is, unless its UTC offset has seconds
# (orjson rounds those to the minute).
_ORJSON_EXACT = frozenset({str, int, bool, type(None), dt.date, uuid.UUID})
_MINUTE = dt.timedelta(minutes=1)


def _orjson_exact(value: Any) -> bool:
    kind = type(value)
    if kind in _ORJSON_EXACT:
        return True
    if kind is list:
        return all(map(_orjson_exact, value))
    if kind is dict:
        return all(map(_orjson_exact, value.values()))
    if kind is dt.datetime:
        offset = value.utcoffset()
        return offset is None or not offset % _MINUTE
    return False


def canonical_json(value: Any) -> bytes:
    """``value`` in canonical form as compact, key-sorted JSON, encoded as UTF-8."""
    if _orjson_exact(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # an int beyond 64 bits, a lone surrogate, a key that is not text
            pass
    text = json.dumps(
        canonical_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return text.encode("utf-8")
