"""Import PRM800K labels, MATH problems and model solutions from JSONL.

Each import runs in the caller's transaction: on the first invalid line it raises
ImportLineError (``FILE:LINE: what is wrong``) and the caller rolls back, so nothing is
written. With ``skip_invalid`` the line is reported through ``on_invalid`` and skipped.
Lines are checked against what the tables can store (app/columns.py) before anything is
written, so a bad value is a line error on SQLite and Postgres alike, never a database error.
"""

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from sqlalchemy.orm import Session

from app import content_keys, prm800k
from app.answers import final_answer, last_boxed, split_steps
from app.columns import StoredFloat, fits, nul_path, string_length
from app.datasets.bulk import analyze, insert_rows, insert_rows_returning_ids
from app.datasets.reading import ImportLineError, SourceLine, batched, decode_json, describe
from app.datasets.store import ConflictError, ProblemSpec, SolutionSpec, Store
from app.models import (
    LABEL_STEPS,
    LABELS,
    PROBLEMS,
    SOLUTIONS,
    STEP_COMPLETIONS,
    USERS,
    QueueState,
    TaskStyle,
)

BATCH_SIZE = 1000
T = TypeVar("T")
ErrorHandler = Callable[[ImportLineError], None]


@dataclass
class ImportSummary:
    """What an import read and wrote, for the CLI and the admin upload page."""

    kind: str
    lines: int = 0
    added: int = 0
    already_present: int = 0
    invalid: int = 0
    created: dict[str, int] = field(default_factory=dict)
    external_ids_not_kept: int = 0
    """Lines whose solution was stored under another external id, which it keeps."""

    def describe(self) -> str:
        if not self.lines:  # an empty upload is a mistake more often than not: say so
            return f"no lines read: the file is empty, no {self.kind} added"
        extra = ", ".join(f"{count} new {name}" for name, count in self.created.items() if count)
        if self.external_ids_not_kept:
            extra += (", " if extra else "") + (
                f"{self.external_ids_not_kept} external ids not kept: their solution is "
                "stored under another"
            )
        text = (
            f"{self.lines} lines read: {self.added} {self.kind} added, "
            f"{self.already_present} already present, {self.invalid} invalid skipped"
        )
        return f"{text} ({extra})" if extra else text


@dataclass
class _Parsed(Generic[T]):
    line: SourceLine
    value: T


def _run(
    lines: Iterable[SourceLine],
    parse: Callable[[SourceLine], T],
    write: Callable[[list[_Parsed[T]]], None],
    summary: ImportSummary,
    skip_invalid: bool,
    on_invalid: ErrorHandler | None,
) -> ImportSummary:
    """Parse every line, write in batches; stop or skip at a bad line."""

    def reject(error: ImportLineError) -> None:
        if not skip_invalid:
            raise error
        summary.invalid += 1
        if on_invalid is not None:
            on_invalid(error)

    def parsed_lines() -> Iterable[_Parsed[T]]:
        for line in lines:
            summary.lines += 1
            try:
                yield _Parsed(line, parse(line))
            except ImportLineError as error:
                reject(error)

    for batch in batched(parsed_lines(), BATCH_SIZE):
        while batch:
            try:
                write(batch)
                break
            except ConflictError as conflict:
                # Conflicts are found before anything of the batch is written.
                reject(batch[conflict.index].line.error(str(conflict)))
                batch = batch[: conflict.index] + batch[conflict.index + 1 :]
    return summary


def _validate(model: type[BaseModel], line: SourceLine, data: object = None) -> BaseModel:
    """Validate a line (or its already-decoded ``data``) against ``model``."""
    if line.unreadable:
        raise line.error(line.unreadable)
    try:
        value = model.model_validate_json(line.text) if data is None else model.model_validate(data)
    except ValidationError as error:
        raise line.error(describe(error)) from None
    # JSON writes NUL only as this escape (a raw one is invalid JSON): most lines skip the walk.
    if "\\u0000" in line.text:
        where = nul_path(value.model_dump())
        if where is not None:
            raise line.error(f"{where}: holds a NUL character (\\u0000), which cannot be stored")
    return value


def _json_object(line: SourceLine) -> dict[str, object]:
    data = decode_json(line)
    if not isinstance(data, dict):
        raise line.error(f"expected a JSON object, got {type(data).__name__}")
    return data


# PRM800K label lines


def import_prm800k(
    session: Session,
    lines: Iterable[SourceLine],
    *,
    skip_invalid: bool = False,
    on_invalid: ErrorHandler | None = None,
) -> ImportSummary:
    """Import PRM800K label lines (phase 1 and 2, QC and screening)."""
    store = Store(session)
    summary = ImportSummary("labels", created=store.created)
    seen: set[str] = set()

    def parse(line: SourceLine) -> prm800k.Record:
        data = _json_object(line)
        record = _validate(prm800k.Record, line, data)
        assert isinstance(record, prm800k.Record)
        difference = prm800k.export_difference(record, data)
        if difference is not None:
            raise line.error(difference)
        return record

    def write(batch: list[_Parsed[prm800k.Record]]) -> None:
        records = [item.value for item in batch]
        problem_ids = store.problem_ids([_question_problem(record) for record in records])
        solution_ids = _phase2_solution_ids(store, records, problem_ids)
        labeler_ids = store.labeler_ids([record.labeler for record in records])
        dedupe_keys = [
            content_keys.label_key(record.labeler, record.timestamp, problem_id, solution_id)
            for record, problem_id, solution_id in zip(
                records, problem_ids, solution_ids, strict=True
            )
        ]
        contents = [
            (labeler_ids[i], record.timestamp, problem_ids[i], solution_ids[i])
            for i, record in enumerate(records)
        ]
        stored = store.stored_labels(contents)
        present = set(seen)
        rows, new_records = [], []
        for i, record in enumerate(records):
            if dedupe_keys[i] in present or contents[i] in stored:
                summary.already_present += 1
                continue
            present.add(dedupe_keys[i])
            new_records.append(record)
            rows.append(
                prm800k.label_row(
                    record,
                    dedupe_key=dedupe_keys[i],
                    labeler_id=labeler_ids[i],
                    problem_id=problem_ids[i],
                    solution_id=solution_ids[i],
                )
            )
        seen.update(row["dedupe_key"] for row in rows)
        _insert_labels(session, new_records, rows)
        summary.added += len(rows)

    _run(lines, parse, write, summary, skip_invalid, on_invalid)
    summary.external_ids_not_kept = store.external_ids_not_kept
    tables = [PROBLEMS, SOLUTIONS, USERS, LABELS, LABEL_STEPS, STEP_COMPLETIONS]
    analyze(session, tables, summary.added)
    return summary


def _question_problem(record: prm800k.Record) -> ProblemSpec:
    question = record.question
    if isinstance(question, prm800k.Phase1Question):
        return ProblemSpec(question.problem, question.ground_truth_answer, solution_known=False)
    return ProblemSpec(
        question.problem, question.ground_truth_answer, question.ground_truth_solution
    )


def _phase2_solution_ids(
    store: Store, records: list[prm800k.Record], problem_ids: list[int]
) -> list[int | None]:
    specs: dict[int, SolutionSpec] = {}
    for i, (record, problem_id) in enumerate(zip(records, problem_ids, strict=True)):
        pre_generated = prm800k.pre_generated(record)
        if pre_generated is not None:
            steps, answer, score = pre_generated
            specs[i] = SolutionSpec(
                problem_id,
                steps,
                answer,
                score,
                generation=record.generation,
                source_id=record.external_id,
            )
    ids = dict(zip(specs, store.solution_ids(list(specs.values())), strict=True))
    return [ids.get(i) for i in range(len(records))]


def _insert_labels(
    session: Session, records: list[prm800k.Record], rows: list[dict[str, object]]
) -> None:
    label_ids = insert_rows_returning_ids(session, LABELS, rows)
    step_rows, completion_rows = [], []
    for record, label_id in zip(records, label_ids, strict=True):
        step_rows.extend(prm800k.step_rows(record, label_id))
        completion_rows.extend(prm800k.completion_rows(record, label_id))
    insert_rows(session, LABEL_STEPS, step_rows)
    insert_rows(session, STEP_COMPLETIONS, completion_rows)


# MATH problems


class _Lenient(BaseModel):
    # Problem and solution dumps come from many tools: unknown keys are ignored.
    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)


Subject = Annotated[str, fits(PROBLEMS.c.subject)]


class SplitProblem(_Lenient):
    """PRM800K's math_splits format."""

    problem: str
    solution: str | None = None
    answer: str | None
    subject: Subject | None = None
    level: Annotated[int, Field(ge=1, le=5)] | None = None
    unique_id: Annotated[str, fits(PROBLEMS.c.source_id)] | None = None


class HendrycksProblem(_Lenient):
    """The original MATH release: ``level`` is "Level N" and the answer is boxed."""

    problem: str
    level: str
    type: Subject
    solution: str

    @model_validator(mode="after")
    def _boxed_answer(self) -> "HendrycksProblem":
        if last_boxed(self.solution) is None:
            raise ValueError("solution has no \\boxed{...} answer")
        return self

    def as_spec(self) -> ProblemSpec:
        level = re.fullmatch(r"Level (\d)", self.level)
        return ProblemSpec(
            self.problem,
            last_boxed(self.solution),
            self.solution,
            subject=self.type,
            level=int(level.group(1)) if level else None,
        )


def _problem_spec(line: SourceLine) -> ProblemSpec:
    data = _json_object(line)
    if "type" in data and "subject" not in data:
        problem = _validate(HendrycksProblem, line, data)
        assert isinstance(problem, HendrycksProblem)
        return problem.as_spec()
    split = _validate(SplitProblem, line, data)
    assert isinstance(split, SplitProblem)
    return ProblemSpec(
        split.problem,
        split.answer,
        split.solution,
        subject=split.subject,
        level=split.level,
        source_id=split.unique_id,
    )


def import_problems(
    session: Session,
    lines: Iterable[SourceLine],
    *,
    skip_invalid: bool = False,
    on_invalid: ErrorHandler | None = None,
) -> ImportSummary:
    """Import MATH problems, in PRM800K's split format or the original Hendrycks format."""
    store = Store(session)
    summary = ImportSummary("problems", created=store.created)

    def write(batch: list[_Parsed[ProblemSpec]]) -> None:
        before = store.created["problems"]
        store.problem_ids([item.value for item in batch])
        added = store.created["problems"] - before
        summary.added += added
        summary.already_present += len(batch) - added

    _run(lines, _problem_spec, write, summary, skip_invalid, on_invalid)
    summary.created = {}
    return summary


# Model solutions to label


SOURCE_ID_LENGTH = string_length(SOLUTIONS.c.source_id)


class SolutionLine(_Lenient):
    """A model sample: a problem (text or unique_id) and steps (a list, or text to split).

    ProcessBench lines ``{id, generator, problem, steps, ...}`` fit this shape as they are.
    """

    problem: str | None = None
    unique_id: str | None = None
    steps: list[str] | None = None
    solution: str | None = None
    answer: str | None = None
    score: StoredFloat | None = None
    generator: Annotated[str, fits(SOLUTIONS.c.generator)] | None = None
    id: str | int | None = None
    external_id: str | int | None = None
    """The team's own id for the solution, the same as ``id``: kept, and exported beside
    each of its labels as PRM800K JSONL's side field ``external_id``."""
    alternatives: list[list[str]] | None = None
    """Per step, other ways to write it: rated at a negative step (phase 2), or always."""
    style: TaskStyle = TaskStyle.PHASE2
    """phase1: labelers rate every candidate of each step and choose one to continue."""

    @field_validator("id", "external_id")
    @classmethod
    def _id_fits(cls, value: str | int | None) -> str | int | None:
        # Stored as text, in source_id.
        if value is not None and len(str(value)) > SOURCE_ID_LENGTH:
            raise ValueError(f"longer than the {SOURCE_ID_LENGTH} characters stored")
        return value

    @model_validator(mode="after")
    def _complete(self) -> "SolutionLine":
        both = self.id is not None and self.external_id is not None
        if both and str(self.id) != str(self.external_id):
            raise ValueError("'id' and 'external_id' differ: give the solution one id")
        if self.problem is None and self.unique_id is None:
            raise ValueError("give the problem, as 'problem' (its text) or 'unique_id'")
        if (self.steps is None) == (self.solution is None):
            raise ValueError("give exactly one of 'steps' (a list) or 'solution' (text)")
        steps = self.step_list()
        if not steps or not all(step.strip() for step in steps):
            raise ValueError("the solution has an empty step, or no steps")
        if self.alternatives is not None and len(self.alternatives) > len(steps):
            raise ValueError(
                f"alternatives are given for {len(self.alternatives)} steps, "
                f"the solution has {len(steps)}"
            )
        return self

    def source_id(self) -> str | None:
        """The id the solution is stored with (``source_id``), if the line gives one."""
        given = self.external_id if self.external_id is not None else self.id
        return None if given is None else str(given)

    def step_list(self) -> list[str]:
        return self.steps if self.steps is not None else split_steps(self.solution or "")


def import_solutions(
    session: Session,
    lines: Iterable[SourceLine],
    *,
    skip_invalid: bool = False,
    on_invalid: ErrorHandler | None = None,
    generation: int = 0,
    queue: bool = True,
) -> ImportSummary:
    """Import model solutions to be labeled (including ProcessBench lines).

    New solutions join the labeling queue in ``generation`` unless ``queue`` is False;
    solutions already stored keep their place.
    """
    queue_state = QueueState.OPEN if queue else QueueState.NOT_QUEUED
    store = Store(session)
    summary = ImportSummary("solutions", created=store.created)

    def parse(line: SourceLine) -> SolutionLine:
        solution = _validate(SolutionLine, line)
        assert isinstance(solution, SolutionLine)
        return solution

    def write(batch: list[_Parsed[SolutionLine]]) -> None:
        problem_ids = _solution_problem_ids(store, [item.value for item in batch])
        specs = [
            SolutionSpec(
                problem_id,
                item.value.step_list(),
                item.value.answer or final_answer(item.value.step_list()),
                item.value.score,
                generator=item.value.generator,
                source_id=item.value.source_id(),
                # A pool solution belongs to no generation until a selection queues it.
                generation=generation if queue else None,
                queue_state=queue_state,
                alternatives=item.value.alternatives,
                style=item.value.style,
            )
            for item, problem_id in zip(batch, problem_ids, strict=True)
        ]
        before = store.created["solutions"]
        store.solution_ids(specs)
        added = store.created["solutions"] - before
        summary.added += added
        summary.already_present += len(batch) - added

    _run(lines, parse, write, summary, skip_invalid, on_invalid)
    summary.created = {"problems": store.created["problems"]}
    summary.external_ids_not_kept = store.external_ids_not_kept
    return summary


def _solution_problem_ids(store: Store, solutions: list[SolutionLine]) -> list[int]:
    by_source = store.problem_ids_by_source_id(
        {s.unique_id for s in solutions if s.unique_id is not None}
    )
    for i, solution in enumerate(solutions):
        if solution.unique_id is not None and solution.unique_id not in by_source:
            raise ConflictError(i, f"no problem has unique_id {solution.unique_id!r}")
    by_text = iter(
        store.problem_ids_by_text(
            [s.problem for s in solutions if s.unique_id is None and s.problem]
        )
    )
    return [by_source[s.unique_id] if s.unique_id is not None else next(by_text) for s in solutions]
