"""What a tune says of a kernel once its leader is verified in a new benchmark process (`tune.kernel`'s
`verified_outcome` and `drift_note`): pure decisions over comparisons, every branch, no measuring."""
from __future__ import annotations

from boo_engine.compare import FASTER, SAME, Comparison
from boo_engine.tune.kernel import DRIFT_LIMIT, drift_note, verified_outcome


def _cmp(ratio: float, low: float, high: float, verdict=FASTER) -> Comparison:
    return Comparison(ratio, low, high, 0.001, verdict, 40, 40, 100.0, 100.0 * ratio)


FINAL = _cmp(0.80, 0.78, 0.82)


def test_a_clear_gain_that_holds_in_a_new_session_wins_with_its_next_run_interval():
    won, message = verified_outcome(_cmp(0.80, 0.79, 0.81), FINAL, "tiles 8x32", "new process", True, "", "")
    assert won and message.startswith("tiles 8x32: ") and "verified in a new process; a new session: [" in message
    assert "(the final said" in message


def test_a_gain_slower_than_the_best_known_kernel_is_not_emitted():
    won, message = verified_outcome(_cmp(0.80, 0.79, 0.81), FINAL, "tiles 8x32", "new process", False,
                                    "but 1.10x the best known kernel", "")
    assert not won and "of the plain build in a new process but 1.10x the best known kernel" in message


def test_a_gain_a_new_session_may_not_repeat_is_not_emitted():
    # faster here, but the next-run interval reaches 1
    won, message = verified_outcome(_cmp(0.97, 0.955, 0.985), FINAL, "tiles 8x32", "reused process", True, "", "")
    assert not won and "too small to hold in a new session" in message and "reused process" in message


def test_a_leader_that_is_not_faster_in_the_verification_loses_and_the_drift_is_said():
    drift = drift_note(100.0, 100.0 * (1 + 2 * DRIFT_LIMIT))
    assert drift.startswith("; the baseline drifted ") and "(100.0 -> " in drift
    won, message = verified_outcome(_cmp(1.0, 0.98, 1.02, SAME), FINAL, "tiles 8x32", "new process", True, "", drift)
    assert not won and "in the final but" in message and "(same) in a new process" in message
    assert message.endswith(drift)
    assert drift_note(100.0, 100.0 * (1 + DRIFT_LIMIT / 2)) == "" and drift_note(None, 100.0) == ""
