"""The agreement figures from arrays alone, without a database: two labelers, one solution."""

import numpy as np

from app.admin.agreement.metrics import (
    FINISH_REASONS,
    NO_GENERATION,
    FirstErrorAgreement,
    SharedLabels,
    agreement_summary,
    label_pairs,
    rated_steps,
)
from app.admin.reliability import IntArray
from app.models import FinishReason


def ints(*values: int) -> IntArray:
    return np.array(values, dtype=np.int64)


def test_steps_both_reached_are_compared_and_the_first_errors_one_step_apart() -> None:
    found_error = FINISH_REASONS.index(FinishReason.FOUND_ERROR.value)
    # Ratings as indexes of (-1, 0, +1): the first label +1, +1, -1; the second +1, -1, and
    # the third step, which only the first label reached, is not compared.
    shared = SharedLabels(
        label_id=ints(1, 2),
        labeler=ints(10, 20),
        solution=ints(5, 5),
        generation=ints(NO_GENERATION, NO_GENERATION),
        finish=ints(found_error, found_error),
        rating_label=ints(0, 0, 0, 1, 1),
        rating_step=ints(0, 1, 2, 0, 1),
        rating_value=ints(2, 2, 0, 2, 0),
    )
    steps = rated_steps(shared)
    assert steps.counts.tolist() == [[0, 0, 2], [1, 0, 1]]
    summary = agreement_summary(shared, steps, label_pairs(shared))
    assert (summary.solutions, summary.labels, summary.labelers) == (1, 2, 2)
    assert (summary.steps, summary.ratings, summary.rating_pairs) == (2, 4, 2)
    assert summary.observed_agreement == 0.5
    assert summary.first_error == FirstErrorAgreement(label_pairs=1, exact=0.0, within_one_step=1.0)
    assert summary.finish_reason.agreement == 1.0


def test_a_give_up_with_a_negative_step_states_no_first_error() -> None:
    """Phase 1 rates candidates -1 before the labeler goes on or gives up: such a give-up
    decided no first error, and is compared with no label's (README, "Agreement")."""
    reason = {r: FINISH_REASONS.index(r.value) for r in FinishReason}
    # Three labels of one solution: a give-up whose first step is -1, a solution all +1, and a
    # bad problem with a -1 too.
    shared = SharedLabels(
        label_id=ints(1, 2, 3),
        labeler=ints(10, 20, 30),
        solution=ints(5, 5, 5),
        generation=ints(NO_GENERATION, NO_GENERATION, NO_GENERATION),
        finish=ints(
            reason[FinishReason.GIVE_UP],
            reason[FinishReason.SOLUTION],
            reason[FinishReason.BAD_PROBLEM],
        ),
        rating_label=ints(0, 1, 1, 2),
        rating_step=ints(0, 0, 1, 0),
        rating_value=ints(0, 2, 2, 0),
    )
    position, states = shared.first_errors
    assert position.tolist() == [0, -1, 0] and states.tolist() == [False, True, False]
    summary = agreement_summary(shared, rated_steps(shared), label_pairs(shared))
    assert summary.first_error == FirstErrorAgreement(
        label_pairs=0, exact=None, within_one_step=None
    )
