"""The drill-down: the ranking of disagreed solutions, and one solution's ratings side by side."""

import itertools

import pytest
from sqlalchemy.orm import Session

from app.admin.disagreements import item_ratings, most_disagreed
from tests.admin.projects import Project, Work, random_project, shared_steps, store
from tests.factories import make_rated_label, make_solution, make_user


def reference_ranking(project: Project) -> list[tuple[int, float, int, int]]:
    """(solution index, score, disagreeing steps, shared steps), most disagreed first."""
    per_solution: dict[int, list[dict[str, int]]] = {}
    for (solution, _), ratings in shared_steps(project.works).items():
        per_solution.setdefault(solution, []).append(ratings)
    ranking = []
    for solution, steps in per_solution.items():
        score = 0.0
        for ratings in steps:
            distances = [abs(a - b) for a, b in itertools.combinations(ratings.values(), 2)]
            score += sum(distances) / len(distances)
        disagreeing = sum(len(set(ratings.values())) > 1 for ratings in steps)
        if score > 0:
            ranking.append((solution, score, disagreeing, len(steps)))
    return sorted(ranking, key=lambda entry: (-entry[1], -entry[2], entry[0]))


def first_error(work: Work) -> int | None:
    return work.ratings.index(-1) + 1 if -1 in work.ratings else None


def test_solutions_rank_by_disagreement_score(session: Session) -> None:
    project = random_project(seed=5, solutions=30)
    stored = store(session, project)
    expected = reference_ranking(project)

    page = most_disagreed(session, per_page=10)
    assert (page.total, page.page, page.page_count) == (len(expected), 1, 3)
    listed = [
        (item.solution_id, item.score, item.disagreeing_steps, item.shared_steps)
        for item in page.items
    ]
    assert listed == [
        (stored.solutions[index].id, pytest.approx(score), disagreeing, steps)
        for index, score, disagreeing, steps in expected[:10]
    ]
    assert [item.rank for item in page.items] == list(range(1, 11))

    top = page.items[0]
    index = expected[0][0]
    works = sorted((w for w in project.works if w.solution == index), key=lambda w: w.labeler)
    assert [
        (verdict.labeler.name, verdict.finish_reason, verdict.first_error) for verdict in top.labels
    ] == [(work.labeler, work.finish, first_error(work)) for work in works]
    assert top.problem == stored.solutions[index].problem.text

    last = most_disagreed(session, page=99, per_page=10)
    assert last.page == 3 and last.items[0].rank == 21
    assert len(last.items) == len(expected) - 20


def test_a_generation_filter_ranks_its_own_labels_only(session: Session) -> None:
    project = random_project(seed=5, solutions=30, generations=(0, 1))
    store(session, project)
    page = most_disagreed(session, generation=1, per_page=100)
    works = [w for w in project.works if project.generations[w.solution] == 1]
    filtered = Project(project.step_counts, project.generations, works)
    assert page.total == len(reference_ranking(filtered))
    assert {item.generation for item in page.items} == {1}


def test_no_disagreement_lists_nothing(session: Session) -> None:
    ann, ben = make_user(session, "ann"), make_user(session, "ben")
    solution = make_solution(session, ["A.", "B."])
    make_rated_label(session, ann, solution, [1, 1])
    make_rated_label(session, ben, solution, [1, 1])
    page = most_disagreed(session)
    assert (page.total, page.page_count, page.items) == (0, 1, [])


def test_an_item_shows_every_counted_label_step_by_step(session: Session) -> None:
    # Made out of name order: the columns go by name, not by id.
    cyd, ann, ben = (make_user(session, name) for name in ("cyd", "ann", "ben"))
    solution = make_solution(session, ["One.", "Two.", "Three."])
    make_rated_label(session, ann, solution, [1, 1, 1], flagged=(1,))
    make_rated_label(session, ben, solution, [1, -1], alternatives=[1, None])
    make_rated_label(session, cyd, solution, [0], finish_reason="give_up", note="Too long")
    make_rated_label(session, ann, solution, [-1], is_quality_control=True)  # does not count

    item = item_ratings(session, solution.id)
    assert item is not None
    assert item.steps == ["One.", "Two.", "Three."]
    assert [label.labeler.name for label in item.labels] == ["ann", "ben", "cyd"]
    by_name = {label.labeler.name: label for label in item.labels}
    ratings = {
        name: [None if step is None else step.rating for step in label.steps]
        for name, label in by_name.items()
    }
    assert ratings == {"ann": [1, 1, 1], "ben": [1, -1, None], "cyd": [0, None, None]}
    assert by_name["cyd"].steps[0] is not None
    assert by_name["ann"].steps[1].flagged  # type: ignore[union-attr]
    error_step = by_name["ben"].steps[1]
    assert error_step is not None
    assert [(alt.text, alt.rating) for alt in error_step.alternatives] == [
        ("other 1", 1),
        ("other 2", None),
    ]
    assert (by_name["cyd"].finish_reason, by_name["cyd"].note) == ("give_up", "Too long")
    assert item.disagreeing_steps == [0, 1]
    assert item_ratings(session, solution.id + 1000) is None
