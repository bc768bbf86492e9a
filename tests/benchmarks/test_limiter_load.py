"""The over-budget check of the limiter benchmark: what it can prove from client-side stamps."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.benchmarks.limiter_load import peak_in_window

Stamp = tuple[float, float, bool]


def _stamps(starts: list[float], duration: float, granted: bool = True) -> list[Stamp]:
    return [(start, start + duration, granted) for start in starts]


class TestPeakInWindow:
    """``peak_in_window``: grants whose calls started within one window, less the slowest call."""

    def test_grants_in_one_instant_all_count(self) -> None:
        """Five grants started together lie in one window."""
        assert peak_in_window(_stamps([1.0] * 5, 0.001), window=1.0) == 5

    def test_grants_a_window_apart_do_not_add_up(self) -> None:
        """Grants spaced by more than the window never share one."""
        assert peak_in_window(_stamps([0.0, 1.5, 3.0], 0.001), window=1.0) == 1

    def test_refusals_do_not_count(self) -> None:
        """Only granted calls count towards the peak."""
        stamps = _stamps([0.0, 0.1], 0.001) + _stamps([0.2, 0.3], 0.001, granted=False)
        assert peak_in_window(stamps, window=1.0) == 2

    def test_slow_calls_shrink_the_span(self) -> None:
        """A slow call widens the uncertainty: grants 0.6 s apart in a 1 s window, with a 0.5 s
        call among them, may lie in different windows, so they are not counted together."""
        stamps = [(0.0, 0.5, True), (0.6, 0.61, True)]
        assert peak_in_window(stamps, window=1.0) == 1

    @given(
        st.lists(st.floats(min_value=0, max_value=100), max_size=60),
        st.floats(min_value=0.01, max_value=5),
    )
    def test_peak_is_bounded_by_the_grants(self, starts: list[float], window: float) -> None:
        """The peak is at most the number of grants, and at least one when any was granted."""
        peak = peak_in_window(_stamps(starts, 0.001), window=window)
        assert peak <= len(starts)
        assert (peak >= 1) == bool(starts)

    @given(st.lists(st.floats(min_value=0, max_value=100), min_size=1, max_size=60))
    def test_peak_never_exceeds_a_brute_force_count(self, starts: list[float]) -> None:
        """The sliding count equals the largest count of starts within ``span`` of some start."""
        window, duration = 2.0, 0.01
        peak = peak_in_window(_stamps(starts, duration), window=window)
        span = window - duration
        brute = max(sum(1 for s in starts if low <= s <= low + span) for low in starts)
        assert peak == brute
