"""The agreement figures against reference implementations, on both databases.

The oracles: the ``krippendorff`` package (alpha, ordinal), scikit-learn (Cohen's kappa, plain
and linearly weighted) and statsmodels (Fleiss' kappa, equal raters per step); the rest are
plain loops over the fixed project's own lists, independent of the app's SQL and numpy.
"""

import itertools
import random
from datetime import datetime

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from sqlalchemy.orm import Session
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from app.admin.agreement.views import (
    AgreementReport,
    agreement_report,
    kappa_matrix,
    overall_agreement,
)
from app.models import GoldLabel, Label, Role
from app.quality.scoring import labeler_quality
from tests.admin.projects import (
    LABELERS,
    Project,
    Work,
    random_gold_questions,
    random_project,
    shared_steps,
    store,
    store_gold,
)
from tests.factories import make_rated_label, make_solution, make_user

RATINGS = [-1, 0, 1]
THRESHOLD = 0.8


def reference_alpha(works: list[Work]) -> float:
    steps = shared_steps(works)
    matrix = np.full((len(LABELERS), len(steps)), np.nan)
    for column, ratings in enumerate(steps.values()):
        for labeler, rating in ratings.items():
            matrix[LABELERS.index(labeler), column] = rating
    return float(
        krippendorff.alpha(
            reliability_data=matrix, level_of_measurement="ordinal", value_domain=RATINGS
        )
    )


def reference_pairs(works: list[Work]) -> dict[tuple[str, str], tuple[list[int], list[int]]]:
    """(labeler, labeler) in name order -> both labelers' ratings of the steps both rated."""
    pairs: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
    for ratings in shared_steps(works).values():
        for first, second in itertools.combinations(sorted(ratings), 2):
            mine, theirs = pairs.setdefault((first, second), ([], []))
            mine.append(ratings[first])
            theirs.append(ratings[second])
    return pairs


def reference_first_errors(works: list[Work]) -> tuple[int, float, float]:
    """(pairs, exact share, within-one share) by a loop over pairs of labels of a solution."""

    def stated(work: Work) -> int | str | None:
        if -1 in work.ratings:
            return work.ratings.index(-1)
        return None if work.finish == "solution" else "unstated"

    exact = near = pairs = 0
    for first, second in itertools.combinations(works, 2):
        if first.solution != second.solution:
            continue
        a, b = stated(first), stated(second)
        if a == "unstated" or b == "unstated":
            continue
        pairs += 1
        exact += a == b
        near += a == b or (isinstance(a, int) and isinstance(b, int) and abs(a - b) <= 1)
    return pairs, exact / pairs, near / pairs


def approx(value: float | None) -> object:
    assert value is not None
    return pytest.approx(value, abs=1e-12)


@pytest.fixture
def project() -> Project:
    return random_project(seed=11, generations=(0, 1))


def test_alpha_kappas_and_first_errors_match_the_oracles(
    session: Session, project: Project
) -> None:
    store(session, project)
    report = agreement_report(session, THRESHOLD)
    overall = report.overall

    steps = shared_steps(project.works)
    assert overall.steps == len(steps)
    assert overall.ratings == sum(len(ratings) for ratings in steps.values())
    assert overall.solutions == len({work.solution for work in project.works})
    assert overall.krippendorff_alpha == approx(reference_alpha(project.works))

    pairs = reference_pairs(project.works)
    assert {(pair.first.name, pair.second.name) for pair in report.pairs} == set(pairs)
    for pair in report.pairs:
        mine, theirs = pairs[pair.first.name, pair.second.name]
        assert pair.steps == len(mine)
        assert pair.cohen_kappa == approx(cohen_kappa_score(mine, theirs, labels=RATINGS))
        assert pair.weighted_kappa == approx(
            cohen_kappa_score(mine, theirs, labels=RATINGS, weights="linear")
        )
        assert pair.observed_agreement == approx(np.mean(np.equal(mine, theirs)))
    equal = sum(np.equal(mine, theirs).sum() for mine, theirs in pairs.values())
    total = sum(len(mine) for mine, _ in pairs.values())
    assert (overall.rating_pairs, overall.observed_agreement) == (total, approx(equal / total))

    label_pairs, exact, within_one = reference_first_errors(project.works)
    assert overall.first_error.label_pairs == label_pairs
    assert overall.first_error.exact == approx(exact)
    assert overall.first_error.within_one_step == approx(within_one)
    assert 0 < exact < within_one < 1  # the fixed data exercises both


def test_per_labeler_agreement_pools_the_others_ratings(session: Session, project: Project) -> None:
    store(session, project)
    report = agreement_report(session, THRESHOLD)
    pairs = reference_pairs(project.works)
    for row in report.labelers:
        name = row.labeler.name
        own: list[int] = []
        others: list[int] = []
        for (first, second), (firsts, seconds) in pairs.items():
            if name == first:
                own, others = own + firsts, others + seconds
            elif name == second:
                own, others = own + seconds, others + firsts
        assert row.rating_pairs == len(own)
        assert row.kappa == approx(cohen_kappa_score(own, others, labels=RATINGS))
        assert row.observed_agreement == approx(np.mean(np.equal(own, others)))
        rated = {key for key, ratings in shared_steps(project.works).items() if name in ratings}
        assert row.shared_steps == len(rated)
    kappas = [row.kappa for row in report.labelers]
    assert kappas == sorted(kappas, key=lambda kappa: kappa if kappa is not None else 2.0)


def test_finish_reason_agreement_counts_pairs_of_labels(session: Session) -> None:
    users = {name: make_user(session, name) for name in LABELERS[:3]}
    solution = make_solution(session, ["One.", "Two.", "Three."])
    make_rated_label(session, users["ann"], solution, [1, 1, 1])
    make_rated_label(session, users["ben"], solution, [1, -1])
    make_rated_label(session, users["cyd"], solution, [1, 1, 1])
    other = make_solution(session, ["One.", "Two."])
    make_rated_label(session, users["ann"], other, [1], finish_reason="give_up")
    make_rated_label(session, users["ben"], other, [1], finish_reason="give_up")

    finish = agreement_report(session, THRESHOLD).overall.finish_reason
    # (ann, cyd) and the two give-ups agree; (ann, ben) and (ben, cyd) do not.
    assert (finish.label_pairs, finish.agreement) == (4, approx(2 / 4))


def test_fleiss_kappa_matches_statsmodels_with_equal_raters(session: Session) -> None:
    rng = random.Random(3)
    project = Project(step_counts=[4] * 12, generations=[0] * 12)
    for solution in range(12):
        for labeler in LABELERS[:3]:
            ratings = [*rng.choices((1, 0), weights=(3, 1), k=3), rng.choice((-1, 0, 1))]
            finish = "found_error" if ratings[-1] == -1 else "solution"
            project.works.append(Work(labeler, solution, ratings, finish))
    store(session, project)

    # statsmodels counts categories 0, 1, 2: ratings shifted by one.
    ratings = [list(ratings.values()) for ratings in shared_steps(project.works).values()]
    table, _ = aggregate_raters(np.array(ratings) + 1, n_cat=3)
    overall = agreement_report(session, THRESHOLD).overall
    assert overall.steps == 48
    assert overall.fleiss_kappa == approx(statsmodels_fleiss_kappa(table, method="fleiss"))


def test_fleiss_kappa_with_varying_raters_weighs_steps_equally(
    session: Session, project: Project
) -> None:
    store(session, project)
    steps = list(shared_steps(project.works).values())
    per_step = []
    for ratings in steps:
        m = len(ratings)
        same = sum(a == b for a, b in itertools.permutations(ratings.values(), 2))
        per_step.append(same / (m * (m - 1)))
    all_ratings = [rating for ratings in steps for rating in ratings.values()]
    chance = sum((all_ratings.count(r) / len(all_ratings)) ** 2 for r in RATINGS)
    expected = (np.mean(per_step) - chance) / (1 - chance)
    assert len({len(ratings) for ratings in steps}) > 1  # raters do vary
    assert agreement_report(session, THRESHOLD).overall.fleiss_kappa == approx(expected)


def test_each_generation_is_computed_on_its_own_labels(session: Session, project: Project) -> None:
    store(session, project)
    report = agreement_report(session, THRESHOLD)
    assert [row.generation for row in report.by_generation] == [0, 1]
    for row in report.by_generation:
        works = [w for w in project.works if project.generations[w.solution] == row.generation]
        assert row.krippendorff_alpha == approx(reference_alpha(works))
        filtered = agreement_report(session, THRESHOLD, generation=row.generation)
        assert filtered.overall.model_dump() == row.model_dump(
            exclude={"generation", "quality_control"}
        )
        assert filtered.generation == row.generation
    assert sum(row.steps for row in report.by_generation) == report.overall.steps


def test_labelers_carry_the_quality_pages_figures_against_gold(
    session: Session, project: Project
) -> None:
    stored = store(session, project)
    # QC answers in generations 0 and 1 (those of the project) and 2 (none shared there);
    # "fay" only answered gold questions.
    questions = random_gold_questions(seed=5, labelers=(*LABELERS, "fay"), generations=(0, 1, 2))
    store_gold(session, questions, stored.users)
    report = agreement_report(session, THRESHOLD)
    quality_page = {row.labeler_id: row for row in labeler_quality(session, THRESHOLD)}

    assert {row.labeler.name for row in report.labelers} == {*LABELERS, "fay"}
    for row in report.labelers:
        name, same = row.labeler.name, quality_page[row.labeler.id]
        assert row.quality_control == same.quality_control == questions.reference(labeler=name)
        assert row.screening == same.screening
        assert row.screening == questions.reference(labeler=name, screening=True)
        assert row.passes_quality_control is same.passes_quality_control
        assert row.passes_quality_control is row.quality_control.passes(THRESHOLD)
        assert row.passes_screening is row.screening.passes(THRESHOLD)
    (fay,) = [row for row in report.labelers if row.labeler.name == "fay"]
    assert (fay.labels, fay.shared_steps, fay.kappa, fay.flag_rate) == (0, 0, None, None)

    assert report.screening_threshold == THRESHOLD
    assert report.quality_control == questions.reference()
    assert [row.generation for row in report.by_generation] == [0, 1, 2]
    for row in report.by_generation:
        assert row.quality_control == questions.reference(generation=row.generation)
    assert report.by_generation[2].steps == 0 and report.by_generation[2].krippendorff_alpha is None

    filtered = agreement_report(session, THRESHOLD, generation=1)
    assert filtered.quality_control == questions.reference(generation=1)
    assert filtered.by_generation[0].quality_control == filtered.quality_control
    for row in filtered.labelers:
        name = row.labeler.name
        assert row.quality_control == questions.reference(labeler=name, generation=1)
        assert row.screening == questions.reference(labeler=name, screening=True)


def test_overall_agreement_is_the_reports_overall(session: Session, project: Project) -> None:
    store(session, project)
    assert overall_agreement(session) == agreement_report(session, THRESHOLD).overall
    assert overall_agreement(session).steps == len(shared_steps(project.works))
    one = agreement_report(session, THRESHOLD, generation=1).overall
    assert overall_agreement(session, generation=1) == one


def comparable(report: AgreementReport) -> dict[str, object]:
    """The agreement figures, leaving out the labelers' activity (their label counts) and
    the figures against gold."""
    dumped = report.model_dump(
        include={"overall", "by_generation", "pairs"},
        exclude={"by_generation": {"__all__": {"quality_control"}}},
    )
    dumped["labelers"] = {
        row.labeler.name: (row.shared_steps, row.rating_pairs, row.kappa) for row in report.labelers
    }
    return dumped


def test_labels_that_do_not_count_change_nothing(session: Session, project: Project) -> None:
    stored = store(session, project)
    clean = comparable(agreement_report(session, THRESHOLD))
    ann, ben = stored.users["ann"], stored.users["ben"]
    first = stored.solutions[0]
    # Quality-control and screening labels, and labels of a QC solution, have gold instead.
    make_rated_label(session, ann, first, [-1], is_quality_control=True)
    make_rated_label(session, ben, first, [-1], is_initial_screening=True)
    qc_solution = make_solution(session, ["A.", "B."])
    gold = make_rated_label(session, ann, qc_solution, [1, 1])
    make_rated_label(session, ben, qc_solution, [-1])
    session.add(GoldLabel(solution_id=qc_solution.id, label_id=gold.id))
    # A solution only one labeler labeled, and a phase-1 label, which has no solution.
    make_rated_label(session, ann, make_solution(session, ["A.", "B."]), [-1])
    session.add(
        Label(
            dedupe_key="phase-1",
            labeler_id=ann.id,
            problem_id=first.problem_id,
            solution_id=None,
            timestamp=datetime(2024, 1, 1),
            finish_reason="solution",
        )
    )
    # An earlier label by a labeler who labeled the solution again: only the latest counts.
    labeler = project.works[0].labeler
    make_rated_label(
        session, stored.users[labeler], first, [-1], timestamp=datetime(2023, 1, 1), generation=0
    )
    # An admin's labels of shared solutions, and a solution shared with an admin alone.
    root = make_user(session, "root", role=Role.ADMIN)
    for solution in stored.solutions[:3]:
        make_rated_label(session, root, solution, [-1], generation=0)
    make_rated_label(session, root, make_solution(session, ["A.", "B."]), [1, 1])
    session.flush()
    assert comparable(agreement_report(session, THRESHOLD)) == clean


def test_no_overlap_and_a_single_labeler(session: Session) -> None:
    empty = agreement_report(session, THRESHOLD)
    assert (empty.overall.steps, empty.overall.krippendorff_alpha, empty.pairs) == (0, None, [])
    assert (empty.overall.first_error.exact, empty.overall.finish_reason.agreement) == (None, None)
    assert empty.labelers == [] and empty.by_generation == []

    ann = make_user(session, "ann")
    for ratings in ([1, 1], [1, -1], [0]):
        make_rated_label(session, ann, make_solution(session, ["A.", "B."]), ratings)
    alone = agreement_report(session, THRESHOLD)
    assert alone.overall.steps == alone.overall.solutions == 0
    assert alone.overall.fleiss_kappa is None and alone.pairs == []
    (row,) = alone.labelers
    assert (row.labeler.name, row.labels) == ("ann", 3)
    assert (row.shared_steps, row.kappa, row.observed_agreement) == (0, None, None)
    assert row.give_up_rate == approx(1 / 3)


def test_identical_ratings_agree_fully_but_kappa_is_undefined(session: Session) -> None:
    ann, ben = make_user(session, "ann"), make_user(session, "ben")
    for _ in range(3):
        solution = make_solution(session, ["A.", "B."])
        make_rated_label(session, ann, solution, [1, 1])
        make_rated_label(session, ben, solution, [1, 1])
    report = agreement_report(session, THRESHOLD)
    overall = report.overall
    assert (overall.steps, overall.observed_agreement) == (6, 1.0)
    # No expected disagreement: alpha and the kappas are 0/0, shown as missing.
    assert overall.krippendorff_alpha is None and overall.fleiss_kappa is None
    (pair,) = report.pairs
    assert (pair.steps, pair.observed_agreement, pair.cohen_kappa) == (6, 1.0, None)
    assert pair.weighted_kappa is None
    assert (overall.first_error.exact, overall.finish_reason.agreement) == (1.0, 1.0)


def test_steps_after_an_early_stop_are_unreached_not_disagreements(session: Session) -> None:
    ann, ben, cyd = (make_user(session, name) for name in ("ann", "ben", "cyd"))
    solution = make_solution(session, ["A.", "B.", "C.", "D."])
    make_rated_label(session, ann, solution, [1, -1])
    make_rated_label(session, ben, solution, [1, 1, 1, 0])
    make_rated_label(session, cyd, solution, [1], finish_reason="give_up")
    report = agreement_report(session, THRESHOLD)
    # Step 1: three ratings; step 2: two; steps 3 and 4: one labeler only.
    assert (report.overall.steps, report.overall.ratings) == (2, 5)
    expected = krippendorff.alpha(
        reliability_data=[[1, -1], [1, 1], [1, np.nan]],
        level_of_measurement="ordinal",
        value_domain=RATINGS,
    )
    assert report.overall.krippendorff_alpha == approx(expected)
    # cyd gave up: no first error stated. ann and ben disagree (step 2 against none).
    first_error = report.overall.first_error
    assert (first_error.label_pairs, first_error.exact, first_error.within_one_step) == (1, 0, 0)
    by_pair = {(pair.first.name, pair.second.name): pair.steps for pair in report.pairs}
    assert by_pair == {("ann", "ben"): 2, ("ann", "cyd"): 1, ("ben", "cyd"): 1}


def test_labeler_rates_count_flags_give_ups_and_bad_problems(session: Session) -> None:
    ann = make_user(session, "ann")
    steps = ["A.", "B.", "C."]
    make_rated_label(session, ann, make_solution(session, steps), [1, 1, 1], flagged=(0, 2))
    make_rated_label(session, ann, make_solution(session, steps), [1, -1], alternatives=[1, None])
    make_rated_label(session, ann, make_solution(session, steps), [0], finish_reason="give_up")
    make_rated_label(session, ann, make_solution(session, steps), [], finish_reason="bad_problem")
    make_rated_label(session, ann, make_solution(session, steps), [1, 1, 1], flagged=(1,))
    (row,) = agreement_report(session, THRESHOLD).labelers
    assert row.labels == 5
    # Two labels flagged a step (one of them two steps).
    assert row.flag_rate == approx(2 / 5)
    assert (row.give_up_rate, row.bad_problem_rate) == (approx(1 / 5), approx(1 / 5))


def test_the_kappa_matrix_is_square_and_symmetric(session: Session, project: Project) -> None:
    store(session, project)
    pairs = agreement_report(session, THRESHOLD).pairs
    matrix = kappa_matrix(pairs)
    names = [labeler.name for labeler in matrix.labelers]
    assert names == sorted(names) and len(names) == len(LABELERS)
    for i, row in enumerate(matrix.cells):
        assert row[i] is None
        for j, cell in enumerate(row):
            assert cell is matrix.cells[j][i]
    assert sum(cell is not None for row in matrix.cells for cell in row) == 2 * len(pairs)
