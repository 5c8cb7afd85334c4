"""Fixed labeling projects for the agreement tests: labels as plain data, and in a database.

A project is a list of ``Work`` items (one labeler's label of one solution) over solutions of
known length; ``GoldQuestions`` adds quality-control and screening questions with gold labels
and the labelers' answers. The tests compute the reference figures from these plain lists,
independently of the app's SQL and numpy, and compare them with what the app computes from
the tables.
"""

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from app.models import SCREENING_GENERATION, Label, Role, Solution, User
from app.quality.questions import mark_quality_control
from app.quality.scoring import GoldComparison
from tests.factories import make_rated_label, make_solution, make_user

LABELERS = ("ann", "ben", "cyd", "dee", "eli")
FINISHED = ("found_error", "solution")
Ratings = list[list[int | None]]
"""Per step, the ratings of its completions (the solution's own step first)."""


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


def compared_with_gold(answers: Iterable[tuple[Ratings, str, Ratings, str]]) -> GoldComparison:
    """The reference for accuracy against gold: each (answer's ratings, its finish reason,
    the gold ratings, the gold finish reason) compared completion by completion, with loops."""
    count = compared = agreeing = rated = first_compared = first_agreeing = 0
    for ratings, finish, gold, gold_finish in answers:
        count += 1
        before = compared
        for mine, theirs in zip(ratings, gold, strict=False):
            for index, rating in enumerate(mine):
                if index < len(theirs) and rating is not None and theirs[index] is not None:
                    compared += 1
                    agreeing += rating == theirs[index]
        rated += compared > before
        if finish in FINISHED and gold_finish in FINISHED:
            first_compared += 1
            first_agreeing += first_error(ratings) == first_error(gold)
    return GoldComparison.of(count, (compared, agreeing, rated), (first_compared, first_agreeing))


def first_error(ratings: Ratings) -> int:
    """The first step whose own completion is rated negative; -1 for none."""
    return next((i for i, step in enumerate(ratings) if step[0] == -1), -1)


@dataclass(frozen=True)
class GoldAnswer:
    labeler: str
    question: int
    generation: int | None
    """The generation it was served in (SCREENING_GENERATION for a screening question;
    None before the worker opened generations, or in phase 1)."""
    ratings: list[int]
    finish: str


@dataclass
class GoldQuestions:
    """Questions with gold labels (ratings and finish reason), and the answers to them."""

    steps: list[int]
    gold: list[tuple[list[int], str]]
    screening: list[bool]
    answers: list[GoldAnswer] = field(default_factory=list)

    def reference(
        self,
        *,
        labeler: str | None = None,
        generation: int | None = None,
        screening: bool = False,
    ) -> GoldComparison:
        """The answers of ``labeler`` (or everyone), of ``generation`` (or every one), to
        screening or to QC questions, compared with their gold labels by the reference."""
        return compared_with_gold(
            (
                [[rating] for rating in answer.ratings],
                answer.finish,
                [[rating] for rating in self.gold[answer.question][0]],
                self.gold[answer.question][1],
            )
            for answer in self.answers
            if self.screening[answer.question] == screening
            and labeler in (None, answer.labeler)
            and generation in (None, answer.generation)
        )


def random_gold_questions(
    seed: int, labelers: tuple[str, ...] = LABELERS, generations: tuple[int | None, ...] = (0, 1)
) -> GoldQuestions:
    """Two QC questions, which every labeler answers once in each generation, and a
    screening question, which each answers once; the answers mostly follow the gold."""
    rng = random.Random(seed)
    questions = GoldQuestions(steps=[], gold=[], screening=[])
    truths = []
    for screening in (False, False, True):
        steps = rng.randint(3, 6)
        truth = rng.choices((1, 0, -1), weights=(5, 2, 2), k=steps)
        # The gold label stops at the first error, as a phase-2 label does.
        gold = truth[: truth.index(-1) + 1] if -1 in truth else truth
        questions.steps.append(steps)
        questions.gold.append((gold, "found_error" if -1 in truth else "solution"))
        questions.screening.append(screening)
        truths.append(truth)
    for labeler in labelers:
        for question, screening in enumerate(questions.screening):
            for generation in (SCREENING_GENERATION,) if screening else generations:
                ratings, finish = phase2_ratings(rng, truths[question], faithful=0.7)
                questions.answers.append(GoldAnswer(labeler, question, generation, ratings, finish))
    return questions


def store_gold(session: Session, questions: GoldQuestions, users: dict[str, User]) -> None:
    """The questions as solutions with an admin's gold labels, made QC questions the way the
    app does it, and the answers as labels (users for labelers not in ``users``)."""
    admin = make_user(session, "gold-keeper", role=Role.ADMIN)
    solutions = []
    for steps, (ratings, finish), screening in zip(
        questions.steps, questions.gold, questions.screening, strict=True
    ):
        generation = SCREENING_GENERATION if screening else 0
        solution = make_solution(
            session, [f"Gold step {n}." for n in range(steps)], generation=generation
        )
        gold = make_rated_label(session, admin, solution, list(ratings), finish_reason=finish)
        mark_quality_control(session, solution.id, gold.id)
        solutions.append(solution)
    for answer in questions.answers:
        if answer.labeler not in users:
            users[answer.labeler] = make_user(session, answer.labeler)
        screening = questions.screening[answer.question]
        make_rated_label(
            session,
            users[answer.labeler],
            solutions[answer.question],
            list(answer.ratings),
            finish_reason=answer.finish,
            generation=answer.generation,
            is_quality_control=not screening,
            is_initial_screening=screening,
        )
