"""Ranked search inside structured filters: the request and result types and the fusion.

See :mod:`persistence.search.model` for the contract every backend keeps and
:mod:`persistence.search.fusion` for how two rankings become one.
"""

from persistence.search.fusion import DEFAULT_WEIGHTS, IDENTIFIER_WEIGHTS, RRF_K, fuse, weights_for
from persistence.search.model import (
    DEFAULT_K,
    MAX_K,
    MAX_OFFSET,
    MAX_SEARCH_TEXT_LENGTH,
    SearchHit,
    SearchMode,
    SearchRequest,
    SearchResult,
)

__all__ = [
    "DEFAULT_K",
    "DEFAULT_WEIGHTS",
    "IDENTIFIER_WEIGHTS",
    "MAX_K",
    "MAX_OFFSET",
    "MAX_SEARCH_TEXT_LENGTH",
    "RRF_K",
    "SearchHit",
    "SearchMode",
    "SearchRequest",
    "SearchResult",
    "fuse",
    "weights_for",
]
