"""Fixed labeling projects for the agreement tests: labels as plain data, and in a database.

A project is a list of ``Work`` items (one labeler's label of one solution) over solutions of
known length. The tests compute the reference figures from these plain lists, independently
of the app's SQL and numpy, and compare them with what the app computes from the tables.
"""

import random
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from app.models import Label, Solution, User
from tests.factories import make_rated_label, make_solution, make_user

LABELERS = ("ann", "ben", "cyd", "dee", "eli")


@dataclass(frozen=True)
class Work:
    labeler: str
    solution: int
    """Index into the project's solutions."""
    ratings: list[int]
    finish: str


@dataclass
class Project:
    step_counts: list[int]
    generations: list[int]
    works: list[Work] = field(default_factory=list)


def phase2_ratings(rng: random.Random, truth: list[int], faithful: float) -> tuple[list[int], str]:
    """A labeler's ratings: each step copies ``truth`` with probability ``faithful``; the
    label stops at the first negative step, and now and then the labeler gives up."""
    ratings: list[int] = []
    for true_rating in truth:
        rating = true_rating if rng.random() < faithful else rng.choice((-1, 0, 1))
        ratings.append(rating)
        if rating == -1:
            return ratings, "found_error"
    if rng.random() < 0.15:
        return ratings[: rng.randrange(len(ratings))], "give_up"
    return ratings, "solution"


def random_project(seed: int, solutions: int = 18, generations: tuple[int, ...] = (0,)) -> Project:
    """Solutions of 3-7 steps, each labeled by 2-4 of the five labelers, who mostly agree."""
    rng = random.Random(seed)
    project = Project(step_counts=[], generations=[])
    for index in range(solutions):
        steps = rng.randint(3, 7)
        project.step_counts.append(steps)
        project.generations.append(generations[index % len(generations)])
        truth = rng.choices((1, 0, -1), weights=(6, 2, 1), k=steps)
        for labeler in rng.sample(LABELERS, rng.randint(2, 4)):
            ratings, finish = phase2_ratings(rng, truth, faithful=0.75)
            project.works.append(Work(labeler, index, ratings, finish))
    return project


@dataclass(frozen=True)
class Stored:
    users: dict[str, User]
    solutions: list[Solution]
    labels: list[Label]


def store(session: Session, project: Project, users: dict[str, User] | None = None) -> Stored:
    """The project's solutions and labels as rows (its labelers too, unless given)."""
    users = users or {name: make_user(session, name) for name in LABELERS}
    solutions = [
        make_solution(
            session, [f"Step {n + 1} of $x_{n}$." for n in range(steps)], generation=generation
        )
        for steps, generation in zip(project.step_counts, project.generations, strict=True)
    ]
    labels = [
        make_rated_label(
            session,
            users[work.labeler],
            solutions[work.solution],
            list(work.ratings),
            finish_reason=work.finish,
        )
        for work in project.works
    ]
    return Stored(users, solutions, labels)


def shared_steps(works: list[Work]) -> dict[tuple[int, int], dict[str, int]]:
    """(solution, step) -> {labeler: rating} for the steps two or more labelers rated."""
    steps: dict[tuple[int, int], dict[str, int]] = {}
    for work in works:
        for step, rating in enumerate(work.ratings):
            steps.setdefault((work.solution, step), {})[work.labeler] = rating
    return {key: ratings for key, ratings in steps.items() if len(ratings) >= 2}
