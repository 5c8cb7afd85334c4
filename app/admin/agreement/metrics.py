"""The agreement figures, computed from the counted labels as arrays: numpy, no database.

Ratings are indexes into STEP_RATINGS; labels, steps and pairs of ratings are parallel arrays
(queries.py reads them; app/admin/reliability.py has the coefficients).
"""

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

from app.admin import reliability
from app.admin.reliability import IntArray
from app.models import FIRST_ERROR_DECIDED, FinishReason

STEP_RATINGS = (-1, 0, 1)
"""Step ratings in order; arrays hold their index (the rating + 1)."""
NEGATIVE = 0
FINISH_REASONS = tuple(reason.value for reason in FinishReason)
NO_FINISH_REASON = -1
NO_GENERATION = np.iinfo(np.int64).min
NO_ERROR = -1
"""The first-error position of a label that finished the solution without a negative step."""

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class SharedLabels:
    """Counted labels (one entry per label, by label id) and their step ratings."""

    label_id: IntArray
    labeler: IntArray
    """Labeler user ids."""
    solution: IntArray
    generation: IntArray
    """NO_GENERATION where the label has none."""
    finish: IntArray
    """Index into FINISH_REASONS, or NO_FINISH_REASON."""
    rating_label: IntArray
    """Index into the label arrays of each step rating."""
    rating_step: IntArray
    rating_value: IntArray
    """Index into STEP_RATINGS."""

    @cached_property
    def first_errors(self) -> tuple[IntArray, BoolArray]:
        """Each label's first negative step (NO_ERROR when none), and whether it states one:
        it finished as ``found_error`` or ``solution`` (models.FIRST_ERROR_DECIDED)."""
        never = np.iinfo(np.int64).max
        first = np.full(len(self.label_id), never, dtype=np.int64)
        negative = self.rating_value == NEGATIVE
        np.minimum.at(first, self.rating_label[negative], self.rating_step[negative])
        first[first == never] = NO_ERROR
        decided = [FINISH_REASONS.index(reason) for reason in FIRST_ERROR_DECIDED]
        return first, np.isin(self.finish, decided)

    def generations(self) -> list[int]:
        present = np.unique(self.generation)
        return [int(number) for number in present if number != NO_GENERATION]


# Steps rated by two or more labelers, and their pairs of ratings.


@dataclass(frozen=True)
class RatedSteps:
    """The steps two or more labelers rated: per step, its solution, generation and rating
    counts; per rating, its step and labeler; per pair of ratings of one step, the step, both
    labelers and both ratings.

    Within a step, ratings are ordered by labeler id, so ``first_labeler < second_labeler``.
    """

    solution: IntArray
    generation: IntArray
    """The generation of the step's labels when grouped by generation, else NO_GENERATION."""
    counts: IntArray
    """Steps x STEP_RATINGS: how many labelers gave each rating."""
    rating_step: IntArray
    rating_labeler: IntArray
    pair_step: IntArray
    first_labeler: IntArray
    second_labeler: IntArray
    first_value: IntArray
    second_value: IntArray

    def only(self, keep: BoolArray) -> "RatedSteps":
        """The steps where ``keep`` is true, with their ratings and pairs."""
        new_index = np.cumsum(keep) - 1
        ratings, pairs = keep[self.rating_step], keep[self.pair_step]
        return RatedSteps(
            solution=self.solution[keep],
            generation=self.generation[keep],
            counts=self.counts[keep],
            rating_step=new_index[self.rating_step[ratings]],
            rating_labeler=self.rating_labeler[ratings],
            pair_step=new_index[self.pair_step[pairs]],
            first_labeler=self.first_labeler[pairs],
            second_labeler=self.second_labeler[pairs],
            first_value=self.first_value[pairs],
            second_value=self.second_value[pairs],
        )


def rated_steps(shared: SharedLabels, by_generation: bool = False) -> RatedSteps:
    """Group the ratings into steps and keep the steps that two or more labelers reached;
    ``by_generation``: a step of one generation's labels apart from another generation's."""
    label_group = _label_groups(shared, by_generation)
    labelers, labeler_rank = np.unique(shared.labeler, return_inverse=True)
    step = shared.rating_step
    # One integer that sorts like (group, step, labeler): one argsort is several times
    # faster than a three-key lexsort.
    step_key = label_group[shared.rating_label] * (int(step.max(initial=0)) + 1) + step
    order = np.argsort(step_key * len(labelers) + labeler_rank[shared.rating_label])
    step_key, rating_label = step_key[order], shared.rating_label[order]
    starts_step = np.ones(len(order), dtype=bool)
    starts_step[1:] = step_key[1:] != step_key[:-1]
    step_of_rating = np.cumsum(starts_step) - 1
    kept_step = np.bincount(step_of_rating) >= 2
    pairable = kept_step[step_of_rating]
    rating_label = rating_label[pairable]
    step_of_rating = (np.cumsum(kept_step) - 1)[step_of_rating[pairable]]
    steps = int(kept_step.sum())
    labeler, value = shared.labeler[rating_label], shared.rating_value[order][pairable]
    first, second = reliability.pairs_within_groups(np.bincount(step_of_rating, minlength=steps))
    step_label = np.zeros(steps, dtype=np.int64)
    step_label[step_of_rating] = rating_label
    return RatedSteps(
        solution=shared.solution[step_label],
        generation=shared.generation[step_label]
        if by_generation
        else np.full(steps, NO_GENERATION, dtype=np.int64),
        counts=reliability.category_counts(step_of_rating, value, steps, len(STEP_RATINGS)),
        rating_step=step_of_rating,
        rating_labeler=labeler,
        pair_step=step_of_rating[first],
        first_labeler=labeler[first],
        second_labeler=labeler[second],
        first_value=value[first],
        second_value=value[second],
    )


def _label_groups(shared: SharedLabels, by_generation: bool) -> IntArray:
    """A number per label that tells its solution apart, or its (generation, solution)."""
    solutions, solution_rank = np.unique(shared.solution, return_inverse=True)
    if not by_generation:
        return solution_rank
    generation_rank = np.unique(shared.generation, return_inverse=True)[1]
    groups: IntArray = generation_rank * len(solutions) + solution_rank
    return groups


# Pairs of labels of one solution: first errors and finish reasons.


@dataclass(frozen=True)
class LabelPairs:
    first: IntArray
    second: IntArray
    """Indexes into the label arrays."""

    def only(self, keep: BoolArray) -> "LabelPairs":
        return LabelPairs(self.first[keep], self.second[keep])


def label_pairs(shared: SharedLabels, by_generation: bool = False) -> LabelPairs:
    """Every pair of counted labels of one solution (by different labelers, by construction);
    ``by_generation``: of one solution and generation."""
    groups = _label_groups(shared, by_generation)
    order = np.argsort(groups, kind="stable")
    _, sizes = np.unique(groups[order], return_counts=True)
    first, second = reliability.pairs_within_groups(sizes.astype(np.int64))
    return LabelPairs(order[first], order[second])


class FirstErrorAgreement(BaseModel):
    label_pairs: int
    """Pairs of labels of one solution that both state a first error (or no error)."""
    exact: float | None
    within_one_step: float | None


class FinishReasonAgreement(BaseModel):
    label_pairs: int
    agreement: float | None


def first_error_agreement(shared: SharedLabels, pairs: LabelPairs) -> FirstErrorAgreement:
    position, states = shared.first_errors
    both = states[pairs.first] & states[pairs.second]
    first, second = position[pairs.first[both]], position[pairs.second[both]]
    exact = first == second
    near = (first != NO_ERROR) & (second != NO_ERROR) & (np.abs(first - second) <= 1)
    return FirstErrorAgreement(
        label_pairs=int(both.sum()),
        exact=_share(exact),
        within_one_step=_share(exact | near),
    )


def finish_reason_agreement(shared: SharedLabels, pairs: LabelPairs) -> FinishReasonAgreement:
    first, second = shared.finish[pairs.first], shared.finish[pairs.second]
    both = (first != NO_FINISH_REASON) & (second != NO_FINISH_REASON)
    return FinishReasonAgreement(
        label_pairs=int(both.sum()), agreement=_share(first[both] == second[both])
    )


def _share(hits: BoolArray) -> float | None:
    return float(hits.mean()) if len(hits) else None


# The figures.


class AgreementSummary(BaseModel):
    """Agreement over one set of labels (all of them, or one generation's)."""

    solutions: int
    """Solutions with counted labels by two or more labelers."""
    labels: int
    labelers: int
    steps: int
    """Steps rated by two or more labelers."""
    ratings: int
    """Ratings of those steps (the pairable values)."""
    rating_pairs: int
    observed_agreement: float | None
    krippendorff_alpha: float | None
    fleiss_kappa: float | None
    first_error: FirstErrorAgreement
    finish_reason: FinishReasonAgreement


def agreement_summary(
    shared: SharedLabels, steps: RatedSteps, pairs: LabelPairs
) -> AgreementSummary:
    """The figures of the rated ``steps`` and the label ``pairs`` of ``shared``."""
    paired = np.unique(np.concatenate([pairs.first, pairs.second]))
    equal = steps.first_value == steps.second_value
    return AgreementSummary(
        solutions=len(np.unique(shared.solution[paired])),
        labels=len(paired),
        labelers=len(np.unique(shared.labeler[paired])),
        steps=len(steps.counts),
        ratings=int(steps.counts.sum()),
        rating_pairs=len(equal),
        observed_agreement=_share(equal),
        krippendorff_alpha=reliability.krippendorff_alpha_ordinal(steps.counts),
        fleiss_kappa=reliability.fleiss_kappa(steps.counts),
        first_error=first_error_agreement(shared, pairs),
        finish_reason=finish_reason_agreement(shared, pairs),
    )


class LabelerName(BaseModel):
    id: int
    name: str


class PairAgreement(BaseModel):
    """Two labelers on the steps both rated."""

    first: LabelerName
    second: LabelerName
    steps: int
    observed_agreement: float | None
    cohen_kappa: float | None
    weighted_kappa: float | None
    """Linearly weighted: -1 against +1 is twice the disagreement of 0 against +1."""


def pair_agreement(steps: RatedSteps, names: dict[int, str]) -> list[PairAgreement]:
    """Cohen's kappa (plain and linearly weighted) for every pair of labelers who share steps."""
    # One integer per pair of labelers: a 1-D unique is much faster than unique rows.
    base = int(steps.second_labeler.max()) + 1 if len(steps.second_labeler) else 1
    pair_key = steps.first_labeler * base + steps.second_labeler
    keys, pair_of = np.unique(pair_key, return_inverse=True)
    confusions = reliability.confusion_matrices(
        pair_of, steps.first_value, steps.second_value, len(keys), len(STEP_RATINGS)
    )
    counts = confusions.sum(axis=(1, 2))
    observed = reliability.observed_agreement(confusions)
    kappa = reliability.cohen_kappa(confusions)
    weighted = reliability.cohen_kappa(confusions, "linear")
    return [
        PairAgreement(
            first=labeler_name(int(first), names),
            second=labeler_name(int(second), names),
            steps=int(counts[index]),
            observed_agreement=reliability.optional(observed[index]),
            cohen_kappa=reliability.optional(kappa[index]),
            weighted_kappa=reliability.optional(weighted[index]),
        )
        for index, (first, second) in enumerate(zip(keys // base, keys % base, strict=True))
    ]


def labeler_name(user_id: int, names: dict[int, str]) -> LabelerName:
    """The labeler with their name from ``names``, or "user N" where it has none."""
    return LabelerName(id=user_id, name=names.get(user_id, f"user {user_id}"))


@dataclass(frozen=True)
class AgreementWithOthers:
    steps: int
    """Steps the labeler rated that others rated too."""
    rating_pairs: int
    observed_agreement: float | None
    kappa: float | None


def agreement_with_others(steps: RatedSteps) -> dict[int, AgreementWithOthers]:
    """Per labeler, their ratings against the others' ratings of the same steps, pooled."""
    labelers, rater = np.unique(
        np.concatenate([steps.first_labeler, steps.second_labeler]), return_inverse=True
    )
    own = np.concatenate([steps.first_value, steps.second_value])
    other = np.concatenate([steps.second_value, steps.first_value])
    confusions = reliability.confusion_matrices(rater, own, other, len(labelers), len(STEP_RATINGS))
    counts = confusions.sum(axis=(1, 2))
    observed = reliability.observed_agreement(confusions)
    kappa = reliability.cohen_kappa(confusions)
    rated = np.searchsorted(labelers, steps.rating_labeler)
    steps_rated = np.bincount(rated, minlength=len(labelers))
    return {
        int(labeler): AgreementWithOthers(
            steps=int(steps_rated[index]),
            rating_pairs=int(counts[index]),
            observed_agreement=reliability.optional(observed[index]),
            kappa=reliability.optional(kappa[index]),
        )
        for index, labeler in enumerate(labelers)
    }
