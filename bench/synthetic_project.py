"""A PRM800K-size labeling project written straight into Postgres with COPY, for benchmarks.

``fill_project(url, ProjectShape())`` writes, into a migrated, empty database: labelers and an
admin, problems, phase-2 solutions in generations 0..N-1 (a share of them labeled by two to
four labelers), screening solutions (generation -1) that every labeler labeled, QC solutions
with a gold label, served in every generation, and QC labels, some phase-1 labels, training
runs and the generations they selected. Labels follow phase-2 rules: ratings stop at the
first negative step, where 1-4 rated alternatives follow; some labels give up or report a
bad problem. Labelers copy a
hidden "true" rating of each step with a faithfulness of their own, so agreement is neither
perfect nor random and differs from labeler to labeler. Labels come one every 1 to 40
seconds and end a few hours before now, so the throughput windows (the last 24 hours to 30
days) hold recent work, as on a busy project.
"""

import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from app.auth.users import hash_password
from app.models import utc_now

SECONDS_BETWEEN_LABELS = (1, 40)
HOURS_BEFORE_NOW = 3
"""Where the labels end, give or take an hour (the spread of 100,000 random gaps)."""
# fmt: off
WORDS = (
    "so", "we", "have", "that", "the", "sum", "of", "both", "sides", "gives", "a", "number",
    "which", "means", "this", "value", "is", "equal", "to", "each", "term", "then", "divide",
    "multiply", "subtract", "add", "factor", "roots", "equation", "since", "must", "be",
)
# fmt: on
MATH = ("$x^2 + 3x - 4 = 0$", "$\\frac{7}{12}$", "$\\sqrt{13}$", "$a_{n+1} = 2a_n$", "$\\pi r^2$")


@dataclass(frozen=True)
class ProjectShape:
    labels: int = 100_000
    labelers: int = 50
    overlap: float = 0.10
    """Share of regular solutions that two or more labelers labeled."""
    generations: int = 6
    qc_solutions: int = 40
    qc_labels_per_solution: int = 25
    screening_solutions: int = 8
    phase1_share: float = 0.03
    training_runs: int = 5
    admin_name: str = "admin"
    admin_password: str = "bench-admin-password"
    seed: int = 0


@dataclass
class _Ids:
    """The next id of each table, as COPY writes explicit ids."""

    next: dict[str, int] = field(default_factory=dict)

    def take(self, table: str) -> int:
        value = self.next.get(table, 1)
        self.next[table] = value + 1
        return value


@dataclass
class _Rows:
    """Rows per table, in COPY column order."""

    tables: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)

    def add(self, table: str, row: tuple[Any, ...]) -> None:
        self.tables.setdefault(table, []).append(row)


COLUMNS = {
    "users": "id, uuid, name, role, password_hash, is_active, is_approved, session_version, "
    "created_at",
    "problems": "id, content_key, text_key, text, ground_truth_solution, ground_truth_answer, "
    "subject, level, created_at",
    "training_runs": "id, status, requested_at, started_at, finished_at, worker, step, "
    "labels_used, metrics, timings, checkpoint_path, is_current",
    "generations": "number, created_at, run_id, selected, wrong_answers, quality_control",
    "solutions": "id, content_key, problem_id, steps, answer, verifier_score, generator, "
    "generation, style, answer_correct, queue_state, overlap, completed_count, created_at",
    "labels": "id, dedupe_key, labeler_id, problem_id, solution_id, timestamp, generation, "
    "is_quality_control, is_initial_screening, total_time, finish_reason, note, created_at",
    "label_steps": "label_id, step_index, chosen_completion",
    "step_completions": "label_id, step_index, completion_index, text, rating, flagged",
    "gold_labels": "solution_id, label_id, created_at",
    "generation_quality_control": "generation, solution_id, added_at",
}
"""Tables in foreign-key order."""


class _Builder:
    def __init__(self, shape: ProjectShape) -> None:
        self.shape = shape
        self.rng = random.Random(shape.seed)
        self.ids = _Ids()
        self.rows = _Rows()
        mean_gap = sum(SECONDS_BETWEEN_LABELS) / 2
        span = timedelta(seconds=mean_gap * shape.labels, hours=HOURS_BEFORE_NOW)
        self.start = utc_now().replace(microsecond=0) - span
        self.clock = self.start
        self.texts = [self._sentence() for _ in range(5_000)]
        self.faithful: dict[int, float] = {}
        self.solution_steps: dict[int, list[str]] = {}
        self.solution_truth: dict[int, list[int]] = {}

    def _sentence(self) -> str:
        words = self.rng.choices(WORDS, k=self.rng.randint(10, 40))
        words.insert(self.rng.randrange(len(words)), self.rng.choice(MATH))
        return " ".join(words) + "."

    def tick(self) -> datetime:
        self.clock += timedelta(seconds=self.rng.randint(*SECONDS_BETWEEN_LABELS))
        return self.clock

    def users(self) -> tuple[int, list[int]]:
        password_hash = hash_password(self.shape.admin_password)
        admin = self._user(self.shape.admin_name, "admin", password_hash)
        labelers = [
            self._user(f"labeler{n:02d}", "labeler", None) for n in range(self.shape.labelers)
        ]
        self.faithful[admin] = 1.0  # the admin's labels are the QC gold: the truth itself
        for labeler in labelers:
            self.faithful[labeler] = self.rng.uniform(0.6, 0.97)
        return admin, labelers

    def _user(self, name: str, role: str, password_hash: str | None) -> int:
        user_id = self.ids.take("users")
        row = (user_id, str(uuid.UUID(int=self.rng.getrandbits(128))), name, role, password_hash)
        self.rows.add("users", (*row, True, True, 0, self.start))
        return user_id

    def problem(self) -> int:
        problem_id = self.ids.take("problems")
        answer = str(self.rng.randint(1, 999))
        text = " ".join(self.rng.choices(self.texts, k=2))
        solution = " ".join(self.rng.choices(self.texts, k=6)) + f" $\\boxed{{{answer}}}$"
        row = (problem_id, f"p{problem_id}", f"t{problem_id}", text, solution, answer)
        self.rows.add("problems", (*row, "Algebra", self.rng.randint(1, 5), self.start))
        return problem_id

    def training_runs(self) -> None:
        for _ in range(self.shape.training_runs):
            run_id = self.ids.take("training_runs")
            started = self.tick()
            metrics = {"step_accuracy": round(self.rng.uniform(0.6, 0.8), 4), "auroc": 0.8}
            timings = {"train": 600.0, "evaluate": 60.0, "score": 120.0, "select": 5.0}
            self.rows.add(
                "training_runs",
                (
                    run_id,
                    "succeeded",
                    started,
                    started,
                    started + timedelta(minutes=15),
                    "bench:1",
                    "select",
                    1000 * run_id,
                    json.dumps(metrics),
                    json.dumps(timings),
                    f"checkpoints/run-{run_id}",
                    run_id == self.shape.training_runs,
                ),
            )
        for number in range(self.shape.generations):
            chosen_by = number if 0 < number <= self.shape.training_runs else None
            qc = self.shape.qc_solutions
            self.rows.add("generations", (number, self.start, chosen_by, 0, 0, qc))

    def solution(self, problem_id: int, generation: int) -> int:
        solution_id = self.ids.take("solutions")
        steps = self.rng.choices(self.texts, k=int(self.rng.triangular(4, 30, 12)))
        answer = str(self.rng.randint(1, 999))
        steps[-1] += f"\n\n# Answer\n\n{answer}"
        self.solution_steps[solution_id] = steps
        self.solution_truth[solution_id] = self.rng.choices((1, 0, -1), (75, 20, 5), k=len(steps))
        self.rows.add(
            "solutions",
            (
                solution_id,
                f"s{solution_id}",
                problem_id,
                json.dumps(steps),
                answer,
                self.rng.random(),
                "gpt-4",
                generation,
                "phase2",
                self.rng.random() < 0.4,
                "full",
                None,
                0,
                self.start,
            ),
        )
        return solution_id

    def label(
        self,
        labeler: int,
        problem_id: int,
        solution_id: int | None,
        generation: int | None,
        kind: tuple[bool, bool] = (False, False),
    ) -> int:
        """A label; ``kind`` is (quality control, initial screening)."""
        label_id = self.ids.take("labels")
        if solution_id is None:
            finish, steps = self._phase1_steps(label_id)
        else:
            finish, steps = self._phase2_steps(label_id, labeler, solution_id)
        for step in steps:
            self.rows.add("label_steps", step[0])
            for completion in step[1]:
                self.rows.add("step_completions", completion)
        note = "unclear statement" if finish in ("give_up", "bad_problem") else None
        timestamp = self.tick()
        self.rows.add(
            "labels",
            (
                label_id,
                f"bench-{label_id}",
                labeler,
                problem_id,
                solution_id,
                timestamp,
                generation,
                *kind,
                self.rng.randint(15_000, 900_000),
                finish,
                note,
                timestamp,
            ),
        )
        return label_id

    def _phase2_steps(
        self, label_id: int, labeler: int, solution_id: int
    ) -> tuple[str, list[tuple[tuple[Any, ...], list[tuple[Any, ...]]]]]:
        texts, truth = self.solution_steps[solution_id], self.solution_truth[solution_id]
        roll = self.rng.random()
        if roll < 0.03:
            return "bad_problem", []
        stop = self.rng.randrange(len(texts)) if roll < 0.07 else len(texts)
        steps = []
        for index in range(stop):
            rating = truth[index]
            if self.rng.random() > self.faithful[labeler]:
                rating = self.rng.choice((-1, 0, 1))
            flagged = self.rng.random() < 0.005
            completions = [(label_id, index, 0, texts[index], rating, flagged)]
            if rating == -1:
                alternatives = range(1, self.rng.randint(2, 5))
                completions += [
                    (
                        label_id,
                        index,
                        n,
                        self.rng.choice(self.texts),
                        self.rng.choice((1, 0, -1)),
                        False,
                    )
                    for n in alternatives
                ]
            steps.append(((label_id, index, None if rating == -1 else 0), completions))
            if rating == -1:
                return "found_error", steps
        return ("solution" if stop == len(texts) else "give_up"), steps

    def _phase1_steps(
        self, label_id: int
    ) -> tuple[str, list[tuple[tuple[Any, ...], list[tuple[Any, ...]]]]]:
        steps = []
        for index in range(self.rng.randint(3, 12)):
            completions = [
                (label_id, index, n, self.rng.choice(self.texts), self.rng.choice((1, 1, 0)), False)
                for n in range(self.rng.choice((1, 1, 1, 3)))
            ]
            steps.append(((label_id, index, 0), completions))
        return "solution", steps


def build_rows(shape: ProjectShape) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the project, per table."""
    builder = _Builder(shape)
    rng = builder.rng
    admin, labelers = builder.users()
    builder.training_runs()
    for _ in range(shape.screening_solutions):
        problem = builder.problem()
        solution = builder.solution(problem, -1)
        for labeler in labelers:
            builder.label(labeler, problem, solution, -1, (False, True))
    for _ in range(shape.qc_solutions):
        problem = builder.problem()
        solution = builder.solution(problem, 0)
        gold = builder.label(admin, problem, solution, 0, (True, False))
        builder.rows.add("gold_labels", (solution, gold, builder.start))
        # Served in every generation; each QC label carries the generation it was given in.
        for generation in range(shape.generations):
            builder.rows.add("generation_quality_control", (generation, solution, builder.start))
        for labeler in rng.sample(labelers, shape.qc_labels_per_solution):
            generation = rng.randrange(shape.generations)
            builder.label(labeler, problem, solution, generation, (True, False))
    problems = [builder.problem() for _ in range(max(1, shape.labels // 8))]
    while builder.ids.next.get("labels", 1) <= shape.labels:
        problem = rng.choice(problems)
        if rng.random() < shape.phase1_share:
            builder.label(rng.choice(labelers), problem, None, None)
            continue
        generation = rng.randrange(shape.generations)
        solution = builder.solution(problem, generation)
        overlap = rng.choice((2, 2, 2, 3, 4)) if rng.random() < shape.overlap else 1
        for labeler in rng.sample(labelers, overlap):
            builder.label(labeler, problem, solution, generation)
    return builder.rows.tables


def _psycopg_url(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def copy_rows(url: str, tables: dict[str, list[tuple[Any, ...]]]) -> None:
    """COPY every table's rows, in foreign-key order, move the id sequences past them, and
    VACUUM ANALYZE."""
    with psycopg.connect(_psycopg_url(url)) as connection, connection.cursor() as cursor:
        for table, columns in COLUMNS.items():
            with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in tables.get(table, []):
                    copy.write_row(row)
        for table in ("users", "problems", "training_runs", "solutions", "labels"):
            cursor.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"(SELECT coalesce(max(id), 1) FROM {table}))"
            )
    # What autovacuum does to a live database soon after: statistics for the planner and
    # the visibility map that lets index-only scans skip the table.
    with psycopg.connect(_psycopg_url(url), autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")


def counts(tables: dict[str, list[tuple[Any, ...]]]) -> Iterator[tuple[str, int]]:
    for table in COLUMNS:
        yield table, len(tables.get(table, []))


def fill_project(url: str, shape: ProjectShape) -> dict[str, int]:
    """Write the project into the migrated, empty Postgres database at ``url``; row counts."""
    tables = build_rows(shape)
    copy_rows(url, tables)
    return dict(counts(tables))
