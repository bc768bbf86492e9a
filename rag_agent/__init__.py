"""Adaptive retrieval on top of a read-only persistence facade."""

__all__: list[str] = []
