"""A smoke test of the memory-at-scale benchmark: tiny size, structure only, never a timing."""

from __future__ import annotations

from tests.benchmarks import memory_scale


def test_one_size_in_a_fresh_process() -> None:
    """The child process reports the store's RSS and every lookup it timed."""
    point = memory_scale.measure(3_000, rounds=3)
    assert point.rows == 3_000
    for stats in (point.by_id, point.by_id_dict, point.by_email, point.by_email_dict):
        assert len(stats.samples) == 3
        assert all(sample > 0 for sample in stats.samples)
    assert len(point.icontains.samples) == 3
