"""Batched get-or-create of problems, solutions and labelers during an import.

Imports go through here a batch of lines at a time: one SELECT per batch finds what exists,
one multi-row INSERT adds the rest. Content keys (app/content_keys.py) decide identity, so a
re-import finds every row and adds nothing.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, TypeVar

from sqlalchemy import Table, select, update
from sqlalchemy.orm import Session

from app import content_keys, prm800k
from app.datasets.bulk import insert_rows_returning_ids
from app.models import LABELS, PROBLEMS, SOLUTIONS, USERS, QueueState, Role, TaskStyle


class ConflictError(ValueError):
    """An input row contradicts a stored one; ``index`` is its position in the batch."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


@dataclass(frozen=True)
class ProblemSpec:
    """A problem as an input line describes it.

    ``solution_known`` is False for PRM800K phase-1 questions, which omit the ground-truth
    solution: any stored problem with the same text and answer is then the one.
    """

    text: str
    ground_truth_answer: str | None
    ground_truth_solution: str | None = None
    solution_known: bool = True
    subject: str | None = None
    level: int | None = None
    source_id: str | None = None

    @cached_property
    def content_key(self) -> str:
        return content_keys.problem_key(
            self.text, self.ground_truth_answer, self.ground_truth_solution
        )


@dataclass(frozen=True)
class SolutionSpec:
    problem_id: int
    steps: list[str] | None
    answer: str | None
    verifier_score: float | None
    generator: str | None = None
    source_id: str | None = None
    generation: int | None = None
    queue_state: QueueState = QueueState.NOT_QUEUED
    alternatives: list[list[str]] | None = None
    style: TaskStyle = TaskStyle.PHASE2

    @cached_property
    def content_key(self) -> str:
        return content_keys.solution_key(
            self.problem_id, self.steps, self.answer, self.verifier_score
        )


KeyedSpec = TypeVar("KeyedSpec", ProblemSpec, SolutionSpec)
LabelContent = tuple[int, datetime, int, int | None]
"""What makes two labels the same (``content_keys.label_key``): labeler, timestamp, problem
and solution ids."""


def _first_by_key(specs: Iterable[KeyedSpec]) -> dict[str, KeyedSpec]:
    """Specs by content key; where lines repeat a row, the first line describes it."""
    first: dict[str, KeyedSpec] = {}
    for spec in specs:
        first.setdefault(spec.content_key, spec)
    return first


@dataclass
class Store:
    """Resolves specs to row ids within one import transaction, counting what it creates."""

    session: Session
    created: dict[str, int] = field(
        default_factory=lambda: {"problems": 0, "solutions": 0, "users": 0}
    )
    _problem_by_text_answer: dict[tuple[str, str | None], int] = field(default_factory=dict)
    external_ids_not_kept: int = 0
    """Solutions whose line's external id (``source_id``) was dropped: the same solution was
    stored already, or earlier in the import, under another id, which it keeps."""

    def problem_ids(self, specs: Sequence[ProblemSpec]) -> list[int]:
        ids: dict[int, int] = {}
        known = {i: spec for i, spec in enumerate(specs) if spec.solution_known}
        ids.update(self._known_problem_ids(known))
        phase1 = {i: spec for i, spec in enumerate(specs) if not spec.solution_known}
        ids.update(self._problem_ids_by_text(phase1))
        return [ids[i] for i in range(len(specs))]

    def _known_problem_ids(self, specs: dict[int, ProblemSpec]) -> dict[int, int]:
        if not specs:
            return {}
        wanted = {spec.content_key for spec in specs.values()}
        rows = self.session.execute(
            select(
                PROBLEMS.c.id,
                PROBLEMS.c.content_key,
                PROBLEMS.c.subject,
                PROBLEMS.c.level,
                PROBLEMS.c.source_id,
            ).where(PROBLEMS.c.content_key.in_(wanted))
        ).all()
        found = {row.content_key: row for row in rows}
        self._check_source_ids(specs, found)
        new = _first_by_key(spec for spec in specs.values() if spec.content_key not in found)
        created = self._insert_problems(list(new.values()))
        by_key = {key: row.id for key, row in found.items()} | created
        self._fill_in_metadata(specs.values(), found)
        for spec in specs.values():
            self._problem_by_text_answer.setdefault(
                (spec.text, spec.ground_truth_answer), by_key[spec.content_key]
            )
        return {i: by_key[spec.content_key] for i, spec in specs.items()}

    def _check_source_ids(self, specs: dict[int, ProblemSpec], found: dict[str, Any]) -> None:
        named = {i: spec for i, spec in specs.items() if spec.source_id}
        if not named:
            return
        source_ids = {spec.source_id for spec in named.values()}
        owners = dict(
            self.session.execute(
                select(PROBLEMS.c.source_id, PROBLEMS.c.content_key).where(
                    PROBLEMS.c.source_id.in_(source_ids)
                )
            ).all()
        )
        claimed: dict[str | None, str] = {}
        for i, spec in named.items():
            owner = owners.get(spec.source_id) or claimed.setdefault(
                spec.source_id, spec.content_key
            )
            if owner != spec.content_key:
                raise ConflictError(
                    i,
                    f"unique_id {spec.source_id!r} already names a problem with a different "
                    "text, answer or solution",
                )

    def _insert_problems(self, specs: list[ProblemSpec]) -> dict[str, int]:
        if not specs:
            return {}
        rows = [
            {
                "content_key": spec.content_key,
                "text_key": content_keys.problem_text_key(spec.text),
                "text": spec.text,
                "ground_truth_solution": spec.ground_truth_solution,
                "ground_truth_answer": spec.ground_truth_answer,
                "subject": spec.subject,
                "level": spec.level,
                "source_id": spec.source_id,
            }
            for spec in specs
        ]
        new_ids = self._insert_returning_ids(PROBLEMS, rows)
        self.created["problems"] += len(new_ids)
        return {spec.content_key: new_id for spec, new_id in zip(specs, new_ids, strict=True)}

    def _fill_in_metadata(self, specs: Any, found: dict[str, Any]) -> None:
        """Give a stored problem the subject, level and id a later import knows."""
        for spec in specs:
            row = found.get(spec.content_key)
            if row is None:
                continue
            values = {
                name: getattr(spec, name)
                for name in ("subject", "level", "source_id")
                if getattr(row, name) is None and getattr(spec, name) is not None
            }
            if values:
                self.session.execute(
                    update(PROBLEMS).where(PROBLEMS.c.id == row.id).values(**values)
                )

    def _problem_ids_by_text(self, specs: dict[int, ProblemSpec]) -> dict[int, int]:
        missing = {
            spec.text
            for spec in specs.values()
            if (spec.text, spec.ground_truth_answer) not in self._problem_by_text_answer
        }
        if missing:
            rows = self.session.execute(
                select(PROBLEMS.c.id, PROBLEMS.c.text, PROBLEMS.c.ground_truth_answer)
                .where(PROBLEMS.c.text_key.in_({content_keys.problem_text_key(t) for t in missing}))
                .order_by(PROBLEMS.c.id)
            ).all()
            for row in rows:
                self._problem_by_text_answer.setdefault((row.text, row.ground_truth_answer), row.id)
        unmatched = {
            i: spec
            for i, spec in specs.items()
            if (spec.text, spec.ground_truth_answer) not in self._problem_by_text_answer
        }
        # What phase 1 leaves unknown is stored as unknown (null ground-truth solution).
        self._known_problem_ids(unmatched)
        return {
            i: self._problem_by_text_answer[(spec.text, spec.ground_truth_answer)]
            for i, spec in specs.items()
        }

    def problem_ids_by_text(self, texts: Sequence[str]) -> list[int]:
        """The first stored problem with each text, whatever its answer; new ones if none."""
        wanted = {content_keys.problem_text_key(text) for text in texts}
        found: dict[str, int] = {}
        rows = self.session.execute(
            select(PROBLEMS.c.id, PROBLEMS.c.text)
            .where(PROBLEMS.c.text_key.in_(wanted))
            .order_by(PROBLEMS.c.id)
        ).all()
        for row in rows:
            found.setdefault(row.text, row.id)
        missing = [ProblemSpec(text, None) for text in dict.fromkeys(texts) if text not in found]
        found.update(zip([spec.text for spec in missing], self.problem_ids(missing), strict=True))
        return [found[text] for text in texts]

    def problem_ids_by_source_id(self, source_ids: set[str]) -> dict[str, int]:
        return dict(
            self.session.execute(
                select(PROBLEMS.c.source_id, PROBLEMS.c.id).where(
                    PROBLEMS.c.source_id.in_(source_ids)
                )
            ).all()
        )

    def solution_ids(self, specs: Sequence[SolutionSpec]) -> list[int]:
        wanted = {spec.content_key for spec in specs}
        found, kept_ids = {}, {}
        for key, id_, source_id in self.session.execute(
            select(SOLUTIONS.c.content_key, SOLUTIONS.c.id, SOLUTIONS.c.source_id).where(
                SOLUTIONS.c.content_key.in_(wanted)
            )
        ):
            found[key], kept_ids[key] = id_, source_id
        new = _first_by_key(spec for spec in specs if spec.content_key not in found)
        kept_ids |= {key: spec.source_id for key, spec in new.items()}
        self.external_ids_not_kept += sum(
            spec.source_id is not None and spec.source_id != kept_ids[spec.content_key]
            for spec in specs
        )
        questions = self._question_texts(new.values())
        rows = [
            {
                "content_key": key,
                "problem_id": spec.problem_id,
                "steps": spec.steps,
                "answer": spec.answer,
                "verifier_score": spec.verifier_score,
                "generator": spec.generator,
                "source_id": spec.source_id,
                "generation": spec.generation,
                "queue_state": spec.queue_state.value,
                "alternatives": spec.alternatives,
                "style": spec.style.value,
                "prm800k_question": questions[key],
            }
            for key, spec in new.items()
        ]
        new_ids = self._insert_returning_ids(SOLUTIONS, rows)
        self.created["solutions"] += len(new_ids)
        found.update(zip(new, new_ids, strict=True))
        return [found[spec.content_key] for spec in specs]

    def _question_texts(self, specs: Iterable[SolutionSpec]) -> dict[str, str | None]:
        """New solutions' PRM800K ``question`` as JSON text, by content key."""
        specs = list(specs)
        problem_ids = {spec.problem_id for spec in specs}
        problems = {
            row.id: row
            for row in self.session.execute(
                select(
                    PROBLEMS.c.id,
                    PROBLEMS.c.text,
                    PROBLEMS.c.ground_truth_solution,
                    PROBLEMS.c.ground_truth_answer,
                ).where(PROBLEMS.c.id.in_(problem_ids))
            )
        }
        texts: dict[str, str | None] = {}
        for spec in specs:
            problem = problems[spec.problem_id]
            texts[spec.content_key] = prm800k.question_text(
                problem.text,
                problem.ground_truth_solution,
                problem.ground_truth_answer,
                prm800k.pre_generated_of(spec.style, spec.steps, spec.answer, spec.verifier_score),
            )
        return texts

    def labeler_ids(self, uuids: Sequence[str]) -> list[int]:
        """User ids for labeler UUIDs; unknown labelers become inactive users.

        A UUID's hex digits name the same labeler in either case (RFC 9562): matched and kept
        in lowercase, as the app makes them, lest one labeler become two who agree."""
        uuids = [uuid.lower() for uuid in uuids]
        wanted = set(uuids)
        found = dict(
            self.session.execute(
                select(USERS.c.uuid, USERS.c.id).where(USERS.c.uuid.in_(wanted))
            ).all()
        )
        new = [uuid for uuid in dict.fromkeys(uuids) if uuid not in found]
        rows = [
            {
                "uuid": uuid,
                "name": f"imported-{uuid}",
                "role": Role.LABELER.value,
                "is_active": False,
            }
            for uuid in new
        ]
        new_ids = self._insert_returning_ids(USERS, rows)
        self.created["users"] += len(new_ids)
        found.update(zip(new, new_ids, strict=True))
        return [found[uuid] for uuid in uuids]

    def stored_labels(self, labels: Sequence[LabelContent]) -> set[LabelContent]:
        """Which of ``labels`` are stored already, by content, whatever their dedupe key: one
        made in the app has its task's key (a submit sent twice is one label), and comes
        back from an export as these same values. A phase-1 line names no solution; made in
        the app, its label kept the solution that served the task."""
        labelers = {labeler for labeler, *_ in labels}
        times = {timestamp for _, timestamp, *_ in labels}
        query = select(
            LABELS.c.labeler_id, LABELS.c.timestamp, LABELS.c.problem_id, LABELS.c.solution_id
        ).where(LABELS.c.labeler_id.in_(labelers), LABELS.c.timestamp.in_(times))
        solutions: dict[tuple[int, datetime, int], set[int | None]] = {}
        for row in self.session.execute(query):
            key = (row.labeler_id, row.timestamp, row.problem_id)
            solutions.setdefault(key, set()).add(row.solution_id)
        return {
            (labeler, timestamp, problem, solution)
            for labeler, timestamp, problem, solution in labels
            if (labeler, timestamp, problem) in solutions
            and (solution is None or solution in solutions[labeler, timestamp, problem])
        }

    def _insert_returning_ids(self, table: Table, rows: list[dict[str, Any]]) -> list[int]:
        return insert_rows_returning_ids(self.session, table, rows)
