"""Agreement between labelers: how far the step labels of one solution can be trusted.

Which labels count. *Regular* labels: not quality-control or screening labels and not labels
of a QC solution (those have a gold label and their own accuracy figures), within the
``generation`` filter when one is given. Agreement needs a solution that two or more
distinct labelers labeled (phase-1 labels have no shared solution, so they never count);
when one labeler labeled a solution twice, only their latest label counts.

A *step* (the unit of agreement) is one step of such a solution; its ratings are the ratings
the labelers gave the solution's own step (completion 0, as in PRM800K: alternatives at the
first error are other completions and are not compared). Phase-2 labels stop at the first
negative step, so later steps are unreached, not disagreements: a step counts when two or
more labelers rated it, with the ratings of those labelers only.

The figures:

- Krippendorff's alpha, ordinal metric on -1 < 0 < +1;
- Fleiss' kappa, generalized to a varying number of raters per step (app/admin/reliability.py);
- observed agreement: the share of pairs of ratings of one step that are equal;
- Cohen's kappa and linearly weighted kappa for every pair of labelers, on the steps both rated;
- per labeler: observed agreement and Cohen's kappa of their ratings against the others'
  ratings of the same steps, pooled (one item per pair of ratings);
- first-error agreement, over pairs of labels of one solution by different labelers: a label
  states a first error when it has a negative step (its first), or "no error" when it finished
  as ``solution`` with none; labels that gave up or stopped otherwise state nothing and are left
  out. *Exact*: the same first-error step, or both no error. *Within one step*: exact, or errors
  at most one step apart;
- finish_reason agreement: over the same pairs of labels, the share with the same reason (labels
  without a reason are left out);
- per labeler, over all their regular labels: the shares of labels that gave up, reported a
  bad problem, or flagged a step;
- beside agreement, accuracy against gold labels, from app/admin/quality.py (the figures of
  the quality-control page, not computed again): per labeler their QC accuracy (step ratings
  and first error) and screening score, per generation and overall the QC answers pooled.
  With a generation filter, QC answers are those served in that generation; the screening
  score is always over every screening answer.

Every figure comes with the number of steps or pairs behind it, and is None where undefined.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel
from sqlalchemy import ColumnElement, String, Subquery, cast, exists, func, select
from sqlalchemy.orm import Session

from app.admin import quality, reliability
from app.admin.aggregates import share
from app.admin.quality import GoldComparison, LabelerQuality
from app.admin.reliability import IntArray
from app.models import (
    SCREENING_GENERATION,
    STEP_COMPLETIONS,
    FinishReason,
    GoldLabel,
    Label,
    StepCompletion,
    User,
)

STEP_RATINGS = (-1, 0, 1)
"""Step ratings in order; arrays hold their index (the rating + 1)."""
NEGATIVE = 0
FINISH_REASONS = tuple(reason.value for reason in FinishReason)
NO_FINISH_REASON = -1
NO_GENERATION = np.iinfo(np.int64).min
NO_ERROR = -1
"""The first-error position of a label that finished the solution without a negative step."""

BoolArray = npt.NDArray[np.bool_]
COUNTED_COLUMNS = (
    Label.id,
    Label.labeler_id,
    Label.solution_id,
    Label.generation,
    Label.finish_reason,
)


# Which labels count, in SQL.


def regular_label_conditions(generation: int | None) -> list[ColumnElement[bool]]:
    """Labels that are not QC or screening labels, nor labels of a QC solution."""
    conditions = [
        Label.is_quality_control.is_(False),
        Label.is_initial_screening.is_(False),
        ~exists().where(GoldLabel.solution_id == Label.solution_id),
    ]
    if generation is not None:
        conditions.append(Label.generation == generation)
    return conditions


def counted_labels(generation: int | None, solution_id: int | None = None) -> Subquery:
    """The labels agreement is computed on (id, labeler_id, solution_id, generation,
    finish_reason): the latest regular label of each labeler, on solutions that two or more
    distinct labelers labeled."""
    regular = [Label.solution_id.is_not(None), *regular_label_conditions(generation)]
    if solution_id is not None:
        regular.append(Label.solution_id == solution_id)
    # min < max: two or more distinct labelers, without count(DISTINCT)'s sort.
    shared = (
        select(Label.solution_id)
        .where(*regular)
        .group_by(Label.solution_id)
        .having(func.min(Label.labeler_id) < func.max(Label.labeler_id))
    )
    newest_first = func.row_number().over(
        partition_by=(Label.solution_id, Label.labeler_id),
        order_by=(Label.timestamp.desc(), Label.id.desc()),
    )
    ranked = (
        select(*COUNTED_COLUMNS, newest_first.label("newest_first"))
        .where(*regular, Label.solution_id.in_(shared))
        .subquery()
    )
    columns = [ranked.c[column.key] for column in COUNTED_COLUMNS]
    return select(*columns).where(ranked.c.newest_first == 1).subquery()


# The counted labels and their step ratings, as arrays.


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
        it has a negative step, or it finished as ``solution``."""
        never = np.iinfo(np.int64).max
        first = np.full(len(self.label_id), never, dtype=np.int64)
        negative = self.rating_value == NEGATIVE
        np.minimum.at(first, self.rating_label[negative], self.rating_step[negative])
        has_error = first != never
        first[~has_error] = NO_ERROR
        solved = self.finish == FINISH_REASONS.index(FinishReason.SOLUTION.value)
        return first, has_error | solved

    def generations(self) -> list[int]:
        present = np.unique(self.generation)
        return [int(number) for number in present if number != NO_GENERATION]


def load_shared_labels(
    session: Session, generation: int | None, solution_id: int | None = None
) -> SharedLabels:
    """The counted labels and their ratings, in one query with one row per label."""
    step = STEP_COMPLETIONS.c
    # Each rating travels as one token, step * 3 + index of the rating: a label's ratings
    # are one string, whatever order the database concatenates them in, and numpy parses
    # them all at once. One row per label is ~10x fewer rows than one per rating.
    token = cast(step.step_index * len(STEP_RATINGS) + step.rating - STEP_RATINGS[0], String)
    # Per label (a correlated subquery, an index-only scan of ix_step_completions_own_rating),
    # not a GROUP BY over every rating, which sorts them all.
    counted = counted_labels(generation, solution_id)
    ratings_of_label = (
        select(func.aggregate_strings(token, " "))
        .where(step.label_id == counted.c.id, step.completion_index == 0, step.rating.is_not(None))
        .correlate(counted)
        .scalar_subquery()
    )
    # A Core statement on the session's connection: plain rows, without the ORM's handling.
    statement = select(counted, ratings_of_label).order_by(counted.c.id)
    rows = session.connection().execute(statement).all()
    tokens = np.fromstring(" ".join(row[5] for row in rows if row[5]), dtype=np.int64, sep=" ")
    per_label = [row[5].count(" ") + 1 if row[5] else 0 for row in rows]
    return SharedLabels(
        label_id=_int_column(rows, 0),
        labeler=_int_column(rows, 1),
        solution=_int_column(rows, 2),
        generation=np.array(
            [NO_GENERATION if row[3] is None else row[3] for row in rows], dtype=np.int64
        ),
        finish=np.array(
            [FINISH_REASONS.index(row[4]) if row[4] else NO_FINISH_REASON for row in rows],
            dtype=np.int64,
        ),
        rating_label=np.repeat(np.arange(len(rows)), per_label),
        rating_step=tokens // len(STEP_RATINGS),
        rating_value=tokens % len(STEP_RATINGS),
    )


def _int_column(rows: Sequence[Sequence[Any]], index: int) -> IntArray:
    return np.fromiter((row[index] for row in rows), dtype=np.int64, count=len(rows))


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


class GenerationAgreement(AgreementSummary):
    generation: int
    quality_control: GoldComparison
    """Every labeler's answers to the QC questions served in this generation, pooled."""


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
            first=_named(int(first), names),
            second=_named(int(second), names),
            steps=int(counts[index]),
            observed_agreement=reliability.optional(observed[index]),
            cohen_kappa=reliability.optional(kappa[index]),
            weighted_kappa=reliability.optional(weighted[index]),
        )
        for index, (first, second) in enumerate(zip(keys // base, keys % base, strict=True))
    ]


def _named(user_id: int, names: dict[int, str]) -> LabelerName:
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


# Per-labeler activity, from SQL aggregates over all their regular labels.


@dataclass(frozen=True)
class Activity:
    labels: int
    give_ups: int
    bad_problems: int
    flagged: int
    """Labels with a flagged step (any completion)."""


def labeler_activity(session: Session, generation: int | None) -> dict[int, Activity]:
    """Labels, give-ups, bad problems and labels with a flag, of each labeler."""
    # Flags are rare: ix_step_completions_flagged finds them without reading every rating.
    flagged = (
        select(StepCompletion.label_id)
        .where(StepCompletion.flagged.is_(True))
        .distinct()
        .subquery()
    )
    rows = session.execute(
        select(
            Label.labeler_id,
            func.count(),
            func.count().filter(Label.finish_reason == FinishReason.GIVE_UP.value),
            func.count().filter(Label.finish_reason == FinishReason.BAD_PROBLEM.value),
            func.count(flagged.c.label_id),
        )
        .outerjoin(flagged, flagged.c.label_id == Label.id)
        .where(*regular_label_conditions(generation))
        .group_by(Label.labeler_id)
    )
    return {labeler_id: Activity(*counts) for labeler_id, *counts in rows}


class LabelerAgreement(BaseModel):
    """One labeler: agreement with the others on shared steps, accuracy against gold labels,
    and their rates."""

    labeler: LabelerName
    labels: int
    """Regular labels (all of them, not only those on shared solutions)."""
    shared_steps: int
    rating_pairs: int
    observed_agreement: float | None
    kappa: float | None
    """Cohen's kappa against the others' pooled ratings of the same steps."""
    quality_control: GoldComparison
    passes_quality_control: bool | None
    screening: GoldComparison
    passes_screening: bool | None
    flag_rate: float | None
    """Share of their labels in which they flagged a step."""
    give_up_rate: float | None
    bad_problem_rate: float | None


def labeler_agreement(
    activity: dict[int, Activity],
    with_others: dict[int, AgreementWithOthers],
    gold: dict[int, LabelerQuality],
    names: dict[int, str],
) -> list[LabelerAgreement]:
    """One row per labeler with regular labels or answers to gold questions, the least
    agreeing first (who needs help)."""
    no_agreement = AgreementWithOthers(steps=0, rating_pairs=0, observed_agreement=None, kappa=None)
    no_labels, no_answers = Activity(0, 0, 0, 0), GoldComparison()
    answered = {
        labeler_id
        for labeler_id, row in gold.items()
        if row.quality_control.answers or row.screening.answers
    }
    rows = []
    for labeler_id in activity.keys() | answered:
        done = activity.get(labeler_id, no_labels)
        agreement = with_others.get(labeler_id, no_agreement)
        checked = gold.get(labeler_id)
        rows.append(
            LabelerAgreement(
                labeler=_named(labeler_id, names),
                labels=done.labels,
                shared_steps=agreement.steps,
                rating_pairs=agreement.rating_pairs,
                observed_agreement=agreement.observed_agreement,
                kappa=agreement.kappa,
                quality_control=checked.quality_control if checked else no_answers,
                passes_quality_control=checked.passes_quality_control if checked else None,
                screening=checked.screening if checked else no_answers,
                passes_screening=checked.passes_screening if checked else None,
                flag_rate=share(done.flagged, done.labels),
                give_up_rate=share(done.give_ups, done.labels),
                bad_problem_rate=share(done.bad_problems, done.labels),
            )
        )
    return sorted(rows, key=_least_agreeing_first)


def _least_agreeing_first(row: LabelerAgreement) -> tuple[bool, float, str]:
    return (row.kappa is None, row.kappa or 0.0, row.labeler.name)


def user_names(session: Session, user_ids: Sequence[int]) -> dict[int, str]:
    if not user_ids:
        return {}
    rows = session.execute(select(User.id, User.name).where(User.id.in_(user_ids)))
    return {user_id: name for user_id, name in rows}


class AgreementReport(BaseModel):
    """Everything on the agreement page, as GET /api/admin/agreement returns it."""

    generation: int | None
    """The generation filter, or None for all labels."""
    screening_threshold: float
    """The step accuracy against gold that passes screening and QC."""
    overall: AgreementSummary
    quality_control: GoldComparison
    """Every labeler's QC answers (of the filtered generation) pooled."""
    by_generation: list[GenerationAgreement]
    pairs: list[PairAgreement]
    labelers: list[LabelerAgreement]


def overall_agreement(session: Session, generation: int | None = None) -> AgreementSummary:
    """The overall figures alone, as the agreement report has them (the overview's headline)."""
    shared = load_shared_labels(session, generation)
    return agreement_summary(shared, rated_steps(shared), label_pairs(shared))


def agreement_report(
    session: Session, threshold: float, generation: int | None = None
) -> AgreementReport:
    """All the agreement figures, over every regular label or one generation's, with the
    labelers' accuracy against gold (``threshold``: the step accuracy that passes)."""
    shared = load_shared_labels(session, generation)
    activity = labeler_activity(session, generation)
    gold = {row.labeler_id: row for row in quality.labeler_quality(session, threshold, generation)}
    names = user_names(session, sorted({*activity, *map(int, np.unique(shared.labeler))}))
    names |= {labeler_id: row.name for labeler_id, row in gold.items()}
    qc_by_generation = quality.quality_control_by_generation(session)
    steps = rated_steps(shared)
    overall = agreement_summary(shared, steps, label_pairs(shared))
    if generation is None:
        by_generation = _by_generation(shared, qc_by_generation)
        quality_control = quality.combined(qc_by_generation.values())
    else:
        quality_control = qc_by_generation.get(generation, GoldComparison())
        by_generation = [
            GenerationAgreement(
                generation=generation, quality_control=quality_control, **overall.model_dump()
            )
        ]
    return AgreementReport(
        generation=generation,
        screening_threshold=threshold,
        overall=overall,
        quality_control=quality_control,
        by_generation=by_generation,
        pairs=pair_agreement(steps, names),
        labelers=labeler_agreement(activity, agreement_with_others(steps), gold, names),
    )


def _by_generation(
    shared: SharedLabels, qc_by_generation: dict[int | None, GoldComparison]
) -> list[GenerationAgreement]:
    """The figures of each generation on its own labels, from one pass over all of them,
    for every generation with shared labels or QC answers (screening aside)."""
    steps = rated_steps(shared, by_generation=True)
    pairs = label_pairs(shared, by_generation=True)
    pair_generation = shared.generation[pairs.first]
    answered = {number for number in qc_by_generation if number is not None}
    numbers = sorted((set(shared.generations()) | answered) - {SCREENING_GENERATION})
    return [
        GenerationAgreement(
            generation=number,
            quality_control=qc_by_generation.get(number, GoldComparison()),
            **agreement_summary(
                shared,
                steps.only(steps.generation == number),
                pairs.only(pair_generation == number),
            ).model_dump(),
        )
        for number in numbers
    ]


def label_generations(session: Session) -> list[int]:
    """The generations labels belong to (screening aside), for the page's filter."""
    # Read from ix_labels_generation_id alone; a generation of QC labels only would show
    # empty figures, which is what it has.
    return list(
        session.scalars(
            select(Label.generation)
            .distinct()
            .where(Label.generation.is_not(None), Label.generation != SCREENING_GENERATION)
            .order_by(Label.generation)
        )
    )


KAPPA_BANDS = (
    (0.0, "poor", "below 0: worse than chance"),
    (0.2, "slight", "0 to 0.20: slight"),
    (0.4, "fair", "0.21 to 0.40: fair"),
    (0.6, "moderate", "0.41 to 0.60: moderate"),
    (0.8, "substantial", "0.61 to 0.80: substantial"),
    (1.0, "almost-perfect", "0.81 to 1: almost perfect"),
)
"""Landis and Koch's (1977) bands for kappa: (upper bound, name, legend)."""


def kappa_band(kappa: float | None) -> str:
    """The name of the band ``kappa`` falls in, for its color; "undefined" for None."""
    if kappa is None:
        return "undefined"
    if kappa < 0:
        return "poor"
    return next((name for upper, name, _ in KAPPA_BANDS[1:] if kappa <= upper), "almost-perfect")


@dataclass(frozen=True)
class KappaMatrix:
    """The pairwise figures as a square table: labelers by name, None where two share no step."""

    labelers: list[LabelerName]
    cells: list[list[PairAgreement | None]]


def kappa_matrix(pairs: list[PairAgreement]) -> KappaMatrix:
    """Labelers sorted by name; each pair appears twice, once on each side of the diagonal."""
    by_id = {labeler.id: labeler for pair in pairs for labeler in (pair.first, pair.second)}
    ordered = sorted(by_id.values(), key=lambda labeler: (labeler.name, labeler.id))
    lookup: dict[tuple[int, int], PairAgreement] = {}
    for pair in pairs:
        lookup[pair.first.id, pair.second.id] = pair
        lookup[pair.second.id, pair.first.id] = pair
    return KappaMatrix(
        labelers=ordered,
        cells=[[lookup.get((row.id, column.id)) for column in ordered] for row in ordered],
    )
