"""vigil's one back-off formula (``vigil.backoff``), which every retry loop uses."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vigil.backoff import Backoff, Streak
from vigil.models.retry import RetryPolicy


def test_pauses_double_from_the_base_up_to_the_cap_without_jitter() -> None:
    formula = Backoff(1.0, 60.0, jitter=None)
    assert [formula.delay(n) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]


@given(attempt=st.integers(min_value=-5, max_value=10**7), draw=st.floats(min_value=0, max_value=0.999999))
def test_a_jittered_pause_is_between_half_and_all_of_the_plain_one_for_any_number_of_failures(
    attempt: int, draw: float
) -> None:
    plain = Backoff(0.5, 300.0, jitter=None).delay(attempt)  # thousands of failures must not overflow
    jittered = Backoff(0.5, 300.0, jitter=lambda: draw).delay(attempt)
    assert 0.25 <= plain <= 300.0
    assert plain / 2 <= jittered < plain or jittered == plain / 2


def test_failures_together_do_not_come_back_in_step() -> None:
    pauses = {round(Backoff(1.0, 60.0).delay(5), 6) for _ in range(20)}
    assert len(pauses) > 1 and all(16 <= p < 32 for p in pauses)


def test_a_streak_counts_failures_in_a_row_and_starts_over_after_a_success() -> None:
    streak = Streak(Backoff(1.0, 4.0, jitter=None))
    assert [streak.next() for _ in range(4)] == [1, 2, 4, 4]
    streak.reset()
    assert streak.next() == 1


def test_the_model_clients_policy_is_the_same_formula_and_honours_retry_after() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=20.0, jitter=lambda: 0.5)
    assert [policy.delay(n) for n in range(3)] == [Backoff(0.5, 20.0, jitter=lambda: 0.5).delay(n) for n in range(3)]
    assert policy.delay(2000) == 20.0 * 0.75  # a patient turn failing for hours stays capped
    assert policy.delay(0, retry_after=7.0) == 7.0
