"""What the agreement page and its API show: the report, assembled from the counted labels
(queries.py), their figures (metrics.py) and the labelers' accuracy against gold labels; and
how the page presents it (kappa bands, the labelers' matrix)."""

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel
from sqlalchemy.orm import Session

from app.admin.agreement.metrics import (
    NO_GENERATION,
    AgreementSummary,
    AgreementWithOthers,
    LabelerName,
    PairAgreement,
    SharedLabels,
    agreement_summary,
    agreement_with_others,
    label_pairs,
    labeler_name,
    pair_agreement,
    rated_steps,
)
from app.admin.agreement.queries import Activity, labeler_activity, load_shared_labels, user_names
from app.figures import share
from app.models import SCREENING_GENERATION, UNNUMBERED_GENERATION
from app.quality import scoring
from app.quality.scoring import GoldComparison, LabelerQuality


class GenerationAgreement(AgreementSummary):
    generation: int | None
    """None for the labels without a generation (phase 1's)."""
    quality_control: GoldComparison
    """Every labeler's answers to the QC questions served in this generation, pooled."""


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
                labeler=labeler_name(labeler_id, names),
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


class AgreementReport(BaseModel):
    """Everything on the agreement page, as GET /api/admin/agreement returns it."""

    generation: int | None
    """The generation filter, or None for all labels."""
    screening_threshold: float
    """The step accuracy against gold that passes screening and QC."""
    qc_min_answers: int
    """The QC answers a labeler needs before QC gives a verdict."""
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
    session: Session, threshold: float, generation: int | None = None, *, min_answers: int = 1
) -> AgreementReport:
    """All the agreement figures, over every regular label or one generation's, with the
    labelers' accuracy against gold (``threshold``: the step accuracy that passes, after
    ``min_answers`` QC answers)."""
    shared = load_shared_labels(session, generation)
    activity = labeler_activity(session, generation)
    gold = {
        row.labeler_id: row
        for row in scoring.labeler_quality(session, threshold, generation, min_answers=min_answers)
    }
    names = user_names(session, sorted({*activity, *map(int, np.unique(shared.labeler))}))
    names |= {labeler_id: row.name for labeler_id, row in gold.items()}
    qc_by_generation = scoring.quality_control_by_generation(session)
    steps = rated_steps(shared)
    overall = agreement_summary(shared, steps, label_pairs(shared))
    if generation is None:
        by_generation = _by_generation(shared, qc_by_generation)
        quality_control = scoring.combined(qc_by_generation.values())
    else:
        number = None if generation == UNNUMBERED_GENERATION else generation
        quality_control = qc_by_generation.get(number, GoldComparison())
        by_generation = [
            GenerationAgreement(
                generation=number, quality_control=quality_control, **overall.model_dump()
            )
        ]
    return AgreementReport(
        generation=generation,
        screening_threshold=threshold,
        qc_min_answers=min_answers,
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
    numbers: list[int | None] = [
        *sorted((set(shared.generations()) | answered) - {SCREENING_GENERATION})
    ]
    if (shared.generation == NO_GENERATION).any() or None in qc_by_generation:
        numbers.append(None)  # phase 1's labels, last
    return [
        GenerationAgreement(
            generation=number,
            quality_control=qc_by_generation.get(number, GoldComparison()),
            **agreement_summary(
                shared,
                steps.only(steps.generation == _stored(number)),
                pairs.only(pair_generation == _stored(number)),
            ).model_dump(),
        )
        for number in numbers
    ]


def _stored(generation: int | None) -> int:
    """A generation as the label arrays hold it."""
    return NO_GENERATION if generation is None else generation


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
