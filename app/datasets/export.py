"""Export labels from the tables as PRM800K JSONL (byte for byte) or TRL stepwise rows.

Why one module over 500 lines: the PRM800K, TRL and consensus exports all read labels
through the one ``ExportFilter`` and the chunked queries here, so what an export selects and
how it streams is read in one file.

Labels stream in id order (import order) in chunks, so memory stays flat however large
the dataset grows. Imported labels and labels made in the app go through the same code.
"""

import functools
import itertools
import json
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from sqlalchemy import ColumnElement, Engine, Select, Text, case, cast, false, func, or_, select
from sqlalchemy.orm import Session

from app import prm800k
from app.consensus import service as consensus
from app.consensus.rule import Consensus, Method, Status
from app.core.db import transaction
from app.datasets.cursor import PullWindow
from app.models import Label, LabelStep, Problem, Solution, StepCompletion, TaskStyle, User
from app.progress import Progress

CHUNK_SIZE = 1000


AnySelect = Select[*tuple[Any, ...]]
Chunked = tuple[int, int | None, dict[str, Any]]
"""A label's id (the chunks' position), its solution's id, its PRM800K record."""

LABELS = Label.__table__.c
USERS = User.__table__.c
PROBLEMS = Problem.__table__.c
SOLUTIONS = Solution.__table__.c
_EXTERNAL_ID = func.coalesce(SOLUTIONS.source_id, LABELS.source_id).label("source_id")
"""A line's ``external_id``: its solution's, or an imported phase-1 line's own."""
STEPS = LabelStep.__table__.c
COMPLETIONS = StepCompletion.__table__.c


@dataclass(frozen=True)
class ExportFilter:
    """Which labels to export; empty lists mean "all"."""

    generations: Sequence[int | None] = ()
    """None among them: the labels without a generation (phase 1's)."""
    since: datetime | None = None
    """Labels made at or after this time: UTC where it has no offset (as the labels'
    timestamps are), converted to UTC where it has one."""
    labelers: Sequence[str] = ()
    """Labeler UUIDs or user names."""
    include_quality_control: bool = True
    include_screening: bool = True
    window: PullWindow | None = None
    """An API pull's window of positions (app/datasets/cursor.py)."""
    consensus: bool = False
    """One line per solution, its consensus (``consensus_records``), in place of each label."""

    def apply(self, query: AnySelect) -> AnySelect:
        """``query`` (of labels joined with their users) limited to the selected labels."""
        return query.where(*self.conditions())

    def conditions(self) -> list[ColumnElement[bool]]:
        """The filter as conditions on the labels and users tables."""
        conditions: list[ColumnElement[bool]] = []
        if self.window is not None:
            conditions.append(self.window.condition())
        if self.generations:
            numbered = LABELS.generation.in_([g for g in self.generations if g is not None])
            unnumbered = LABELS.generation.is_(None) if None in self.generations else false()
            conditions.append(or_(numbered, unnumbered))
        if self.since is not None:
            since = self.since
            if since.tzinfo is not None:
                since = since.astimezone(UTC).replace(tzinfo=None)
            conditions.append(LABELS.timestamp >= since)
        if self.labelers:
            conditions.append(or_(USERS.uuid.in_(self.labelers), USERS.name.in_(self.labelers)))
        if not self.include_quality_control:
            conditions.append(LABELS.is_quality_control.is_(False))
        if not self.include_screening:
            conditions.append(LABELS.is_initial_screening.is_(False))
        return conditions


def unknown_labelers(session: Session, labelers: Sequence[str]) -> list[str]:
    """Those of ``labelers`` (UUIDs or user names) that are nobody's: a typo would
    otherwise export nothing without a word."""
    if not labelers:
        return []
    found = session.execute(
        select(USERS.uuid, USERS.name).where(
            or_(USERS.uuid.in_(labelers), USERS.name.in_(labelers))
        )
    ).all()
    known = {value for row in found for value in row}
    return [labeler for labeler in labelers if labeler not in known]


class ExportError(ValueError):
    """A stored label cannot be written as JSON."""


@dataclass
class ExportSummary:
    lines: int = 0
    step_ratings: int = 0
    by_finish_reason: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def describe(self) -> str:
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(self.by_finish_reason.items()))
        return f"{self.lines} lines, {self.step_ratings} step ratings" + (
            f" ({reasons})" if reasons else ""
        )


# Core columns, not ORM attributes: rows come back as plain tuples, without ORM loading.
# Both row shapes below start with a line's short fields, in this order.
_LINE_FIELDS = (
    LABELS.id,
    USERS.uuid,
    LABELS.timestamp,
    LABELS.generation,
    LABELS.is_quality_control,
    LABELS.is_initial_screening,
)
_LABEL_COLUMNS = (
    *_LINE_FIELDS,
    LABELS.total_time,
    LABELS.finish_reason,
    PROBLEMS.text,
    PROBLEMS.ground_truth_solution,
    PROBLEMS.ground_truth_answer,
    LABELS.solution_id,
    SOLUTIONS.steps,
    SOLUTIONS.answer,
    SOLUTIONS.verifier_score,
    SOLUTIONS.style,
    _EXTERNAL_ID,
)


def count_labels(session: Session, label_filter: ExportFilter) -> int:
    """How many labels the filter selects (the progress bar's total)."""
    query = select(func.count()).join_from(
        Label.__table__, User.__table__, USERS.id == LABELS.labeler_id
    )
    return session.scalar(label_filter.apply(query)) or 0


def iter_records(session: Session, label_filter: ExportFilter) -> Iterator[dict[str, Any]]:
    """Every selected label as a PRM800K dict, in import order."""
    return (record for _solution, record in solution_records(session, label_filter))


def solution_records(
    session: Session, label_filter: ExportFilter
) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """``iter_records`` with each label's solution id (None for a phase-1 label without one):
    the worker tells the labels on solutions a PRM chose from the others."""
    return (
        (solution_id, record)
        for _label, solution_id, record in _label_records(session, label_filter)
    )


def _label_records(
    session: Session, label_filter: ExportFilter
) -> Iterator[tuple[int, int | None, dict[str, Any]]]:
    """Every selected label's id, solution id and PRM800K dict, in import order."""
    after = 0
    while True:
        labels = _label_chunk(session, label_filter, after)
        if not labels:
            return
        yield from labels
        after = labels[-1][0]


def _label_chunk(session: Session, label_filter: ExportFilter, after: int) -> list[Chunked]:
    """The next CHUNK_SIZE selected labels after label ``after``: (id, solution id, record)."""
    return _labels_where(session, [*label_filter.conditions(), LABELS.id > after], CHUNK_SIZE)


def _selected(columns: Sequence[Any], conditions: Sequence[ColumnElement[bool]]) -> AnySelect:
    """``columns`` of the labels that meet ``conditions``, with their users, problems and
    solutions, in id order."""
    return (
        select(*columns)
        .join(User.__table__, USERS.id == LABELS.labeler_id)
        .join(Problem.__table__, PROBLEMS.id == LABELS.problem_id)
        .outerjoin(Solution.__table__, SOLUTIONS.id == LABELS.solution_id)
        .where(*conditions)
        .order_by(LABELS.id)
    )


def _labels_where(
    session: Session, conditions: Sequence[ColumnElement[bool]], limit: int | None = None
) -> list[Chunked]:
    """The labels that meet ``conditions`` (at most ``limit``): (id, solution id, record)."""
    labels = session.execute(_selected(_LABEL_COLUMNS, conditions).limit(limit)).all()
    if not labels:
        return []
    steps = _steps_by_label(session, {label.id for label in labels})
    return [
        (label.id, label.solution_id, _record(label, steps.get(label.id, []))) for label in labels
    ]


def built_records(session: Session, label_ids: Sequence[int]) -> list[Chunked]:
    """The labels with these ids, their records built from their rows (not stored text)."""
    return _labels_where(session, [LABELS.id.in_(label_ids)])


def _steps_by_label(session: Session, label_ids: set[int]) -> dict[int, list[dict[str, Any]]]:
    """The labels' steps in PRM800K's form, read in one query: each step joined with its
    completions, a step without any as one row of nulls (its completions export as null,
    app/prm800k.py)."""
    # A range scan of the primary key is cheaper than a long IN list; with filters, rows
    # of labels in the range but not selected are skipped here.
    first, last = min(label_ids), max(label_ids)
    rows = session.execute(
        select(
            STEPS.label_id,
            STEPS.step_index,
            STEPS.chosen_completion,
            # Most steps have no human completion: reading the column as text and decoding
            # the few that hold one skips the JSON type's per-row processing.
            cast(STEPS.human_completion, Text),
            COMPLETIONS.text,
            COMPLETIONS.rating,
            COMPLETIONS.flagged,
        )
        .outerjoin(
            StepCompletion.__table__,
            (COMPLETIONS.label_id == STEPS.label_id) & (COMPLETIONS.step_index == STEPS.step_index),
        )
        .where(STEPS.label_id.between(first, last))
        .order_by(STEPS.label_id, STEPS.step_index, COMPLETIONS.completion_index)
    ).all()
    steps: dict[int, list[dict[str, Any]]] = defaultdict(list)
    step: tuple[int, int] | None = None
    completions: list[dict[str, Any]] | None = None
    for label_id, step_index, chosen, human, text, rating, flagged in rows:
        if label_id not in label_ids:
            continue
        if (label_id, step_index) != step:
            # The first row of a step: its completion text is null where it has none.
            step = label_id, step_index
            completions = None if text is None else []
            human_completion = None if human is None else json.loads(human)
            steps[label_id].append(prm800k.step_dict(completions, human_completion, chosen))
        if completions is not None:
            completions.append(prm800k.completion_dict(text, rating, flagged))
    return steps


def _record(label: Any, steps: list[dict[str, Any]]) -> dict[str, Any]:
    # Phase-1 labels (imported ones have no solution) show the question as phase 1 did.
    phase1 = label.solution_id is None or label.style == TaskStyle.PHASE1.value
    pre_generated = None if phase1 else (label.steps, label.answer, label.verifier_score)
    return prm800k.record_dict(
        labeler=label.uuid,
        timestamp=label.timestamp,
        generation=label.generation,
        is_quality_control=label.is_quality_control,
        is_initial_screening=label.is_initial_screening,
        question=prm800k.question_dict(
            label.text, label.ground_truth_solution, label.ground_truth_answer, pre_generated
        ),
        steps=steps,
        total_time=label.total_time,
        finish_reason=label.finish_reason,
        external_id=label.source_id,
    )


# PRM800K lines from stored text (app/prm800k.py, "Stored text"): what a pull reads.

_without_solution = LABELS.solution_id.is_(None)
_LINE_COLUMNS = (
    *_LINE_FIELDS,
    LABELS.solution_id,
    _EXTERNAL_ID,
    LABELS.prm800k_label,
    SOLUTIONS.prm800k_question,
    # A label without a solution (imported phase 1) shows its problem's short question,
    # encoded here; no other label reads the problem.
    case((_without_solution, PROBLEMS.text)).label("problem"),
    case((_without_solution, PROBLEMS.ground_truth_answer)).label("ground_truth_answer"),
)


def line_chunk(
    session: Session, label_filter: ExportFilter, after: int, upto: int | None = None
) -> tuple[int, str]:
    """The next CHUNK_SIZE selected labels after label ``after`` (up to label ``upto``) as
    PRM800K JSONL, the lines ``export_line`` writes: (the last label's id, 0 when there are
    none; the text)."""
    conditions = [*label_filter.conditions(), LABELS.id > after]
    if upto is not None:
        conditions.append(LABELS.id <= upto)
    rows = session.execute(_selected(_LINE_COLUMNS, conditions).limit(CHUNK_SIZE)).all()
    if not rows:
        return 0, ""
    lines = [_stored_line(*row) for row in rows]
    unstored = [row.id for row, line in zip(rows, lines, strict=True) if line is None]
    if unstored:
        # Labels stored before their text was (or a question JSON cannot write): built
        # as ``steplabel export`` builds every line.
        built = {
            label_id: export_line(record, "prm800k")
            for label_id, _solution, record in built_records(session, unstored)
        }
        lines = [line or built[row.id] for row, line in zip(rows, lines, strict=True)]
    return rows[-1].id, "".join(lines)  # type: ignore[arg-type]  # none is None now


def _stored_line(
    _id: int,
    labeler: str,
    timestamp: datetime,
    generation: int | None,
    is_quality_control: bool,
    is_initial_screening: bool,
    solution_id: int | None,
    external_id: str | None,
    label: str | None,
    question: str | None,
    problem: str | None,
    ground_truth_answer: str | None,
) -> str | None:
    """A row of ``_LINE_COLUMNS`` as its line; None where a part is not stored."""
    if solution_id is None:
        assert problem is not None
        question = prm800k.question_text(problem, None, ground_truth_answer, None)
    if question is None or label is None:
        return None
    return prm800k.line_text(
        labeler=labeler,
        timestamp=timestamp,
        generation=generation,
        is_quality_control=is_quality_control,
        is_initial_screening=is_initial_screening,
        question=question,
        label=label,
        external_id=external_id,
    )


def trl_row(record: dict[str, Any]) -> dict[str, Any] | None:
    """TRL's stepwise-supervision row for one label: the path the labeler followed.

    Each step on the path is the chosen completion, else the labeler's own step, else the
    first completion rated negative, where the path ends. Neutral counts as correct, as in
    "Let's Verify Step by Step". None when no step on the path is rated.
    """
    completions: list[str] = []
    labels: list[bool] = []
    for step in record["label"]["steps"]:
        taken = _step_taken(step)
        if taken is None or taken["rating"] is None:
            break
        completions.append(taken["text"])
        labels.append(taken["rating"] >= 0)
        if taken["rating"] < 0:
            break
    if not completions:
        return None
    return {"prompt": record["question"]["problem"], "completions": completions, "labels": labels}


def _step_taken(step: dict[str, Any]) -> dict[str, Any] | None:
    if step["chosen_completion"] is not None:
        chosen: dict[str, Any] = step["completions"][step["chosen_completion"]]
        return chosen
    human = step["human_completion"]
    if human is not None:
        # A labeler's own step is correct by construction when they left it unrated.
        return {"text": human["text"], "rating": 1 if human["rating"] is None else human["rating"]}
    return next((c for c in step["completions"] or [] if c["rating"] == -1), None)


def write_export(
    session: Session,
    out: TextIO,
    label_filter: ExportFilter,
    export_format: str = "prm800k",
    progress: Progress | None = None,
) -> ExportSummary:
    """Write the selected labels to ``out`` in ``export_format`` (prm800k or trl).

    ``progress`` advances by every label read (a label without a TRL row too).
    """
    summary = ExportSummary()
    for record in iter_records(session, label_filter):
        if progress is not None:
            progress.advance()
        line = export_line(record, export_format)
        if line is None:
            continue
        out.write(line)
        summary.lines += 1
        summary.step_ratings += sum(len(s["completions"] or []) for s in record["label"]["steps"])
        summary.by_finish_reason[record["label"]["finish_reason"] or "unfinished"] += 1
    return summary


# One label per solution.


@dataclass
class ConsensusSummary:
    """What a consensus export wrote, and the solutions it could not write."""

    lines: int = 0
    by_method: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    needs_adjudication: int = 0
    """Solutions marked for adjudication and not adjudicated: left out."""
    no_votes: int = 0
    """Solutions whose counted labels all gave up, reported a bad problem or never finished."""

    def describe(self) -> str:
        methods = ", ".join(f"{n} {method}" for method, n in sorted(self.by_method.items()))
        return (
            f"{self.lines} lines"
            + (f" ({methods})" if methods else "")
            + f"; left out: {self.needs_adjudication} awaiting adjudication, "
            f"{self.no_votes} without a judging label"
        )


def consensus_records(
    session: Session, label_filter: ExportFilter, summary: ConsensusSummary | None = None
) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """The consensus export (``steplabel export --consensus``, the worker's consensus
    labels): one PRM800K line per solution, with its solution id, by the rule of
    app/consensus/. The vote is among the labels ``label_filter`` selects, regular ones only
    (QC and screening answers never vote). Each line carries its provenance in the side
    field ``steplabel_consensus``; PRM800K's own keys are as every export writes them.

    A solution decided by two or more votes or by an adjudicator is one line built from the
    final ratings (labeler ``CONSENSUS_LABELER``), written where its last counted label
    would be; a solution with one judging label is that label's own line; phase-1 labels are
    their own lines, not voted on. Solutions marked for adjudication and not adjudicated, and
    those without a judging label, are left out and counted in ``summary``.
    """
    summary = summary if summary is not None else ConsensusSummary()
    counted = consensus.counted_labels(session, label_filter.conditions())
    by_solution = consensus.solution_votes(session, counted)
    as_is: dict[int, tuple[consensus.SolutionVotes | None, consensus.CountedLabel]] = {}
    built_at: dict[int, consensus.SolutionVotes] = {}
    for label in counted:
        if label.solution_id is None:
            as_is[label.label_id] = (None, label)
    for votes in by_solution.values():
        if votes.phase1:
            for label in votes.labels:
                as_is[label.label_id] = (votes, label)
            continue
        decided = votes.consensus()
        if decided.status == Status.NEEDS_ADJUDICATION:
            summary.needs_adjudication += 1
        elif decided.status == Status.NO_VOTES:
            summary.no_votes += 1
        elif decided.method == Method.SINGLE:
            (voter,) = decided.voters
            as_is[voter] = (votes, next(x for x in votes.labels if x.label_id == voter))
        else:
            built_at[max(label.label_id for label in votes.labels)] = votes
    for label_id, solution_id, record in _label_records(session, label_filter):
        line: dict[str, Any] | None = None
        if label_id in as_is:
            owner, label = as_is[label_id]
            decided = (
                owner.consensus()
                if owner is not None and not owner.phase1
                else Consensus(Status.DECIDED, Method.PHASE1, (), (label_id,))
            )
            line = {**record, consensus.PROVENANCE_KEY: consensus.provenance(owner, decided, label)}
        elif label_id in built_at:
            line = consensus.consensus_record(session, built_at[label_id])
        if line is None:
            continue
        summary.lines += 1
        summary.by_method[line[consensus.PROVENANCE_KEY]["method"]] += 1
        yield solution_id, line


def write_consensus_export(
    session: Session, out: TextIO, label_filter: ExportFilter, progress: Progress | None = None
) -> ConsensusSummary:
    """Write ``consensus_records`` to ``out`` as JSONL."""
    summary = ConsensusSummary()
    for _solution_id, line in consensus_records(session, label_filter, summary):
        if progress is not None:
            progress.advance()
        out.write(prm800k.dumps(line))
        out.write("\n")
    return summary


def export_line(record: dict[str, Any], export_format: str) -> str | None:
    """A record as one line of ``export_format`` (newline included); None when TRL has no
    row for it."""
    row = record if export_format == "prm800k" else trl_row(record)
    if row is None:
        return None
    try:
        return prm800k.dumps(row) + "\n"
    except ValueError:
        # Imports refuse them now; a database filled before may still hold one.
        raise ExportError(
            f"the label of {record['labeler']} at {record['timestamp']} holds a NaN or "
            "infinite score, which JSON cannot write"
        ) from None


def stream_export(
    engine: Engine, label_filter: ExportFilter, export_format: str = "prm800k"
) -> Iterator[str]:
    """The export as text, one piece per CHUNK_SIZE labels, the same lines ``write_export``
    writes. Each chunk is read in a short transaction of its own, so that a slow reader
    never holds one open (on SQLite every transaction takes the write lock). Within a
    pull's window the labels are final, so the chunks add up to one consistent export.

    A consensus export is read in one transaction: its votes span the whole window.
    """
    if label_filter.consensus:
        with transaction(engine) as session:
            written = [
                prm800k.dumps(line) + "\n" for _id, line in consensus_records(session, label_filter)
            ]
        for start in range(0, len(written), CHUNK_SIZE):
            yield "".join(written[start : start + CHUNK_SIZE])
        return
    if export_format == "prm800k":
        yield from _stored_lines(engine, label_filter)
        return
    after = 0
    while True:
        with transaction(engine) as session:
            labels = _label_chunk(session, label_filter, after)
        if not labels:
            return
        lines = (export_line(record, export_format) for _id, _solution, record in labels)
        yield "".join(line for line in lines if line is not None)
        after = labels[-1][0]


def chunk_ends(session: Session, label_filter: ExportFilter) -> list[int]:
    """The id of every CHUNK_SIZE-th selected label, and of the last: chunk k holds the
    selected labels after end k-1 up to end k. Within a pull's window the labels are final,
    so the chunks hold the same labels whenever, and in whichever order, they are read."""
    numbered = _selected(
        [
            LABELS.id,
            func.row_number().over(order_by=LABELS.id).label("n"),
            func.count().over().label("selected"),
        ],
        label_filter.conditions(),
    ).subquery()
    last_of_chunk = or_(numbered.c.n % CHUNK_SIZE == 0, numbered.c.n == numbered.c.selected)
    return list(session.scalars(select(numbered.c.id).where(last_of_chunk).order_by(numbered.c.id)))


def stored_line_reads(engine: Engine, label_filter: ExportFilter) -> Iterator[Callable[[], str]]:
    """``stream_export``'s PRM800K chunks as reads that can run side by side, each in a
    short transaction of its own (app/read_ahead.py, ``read_side_by_side``)."""
    with transaction(engine) as session:
        ends = chunk_ends(session, label_filter)

    def read(after: int, upto: int) -> str:
        with transaction(engine) as session:
            return line_chunk(session, label_filter, after, upto)[1]

    for after, upto in itertools.pairwise([0, *ends]):
        yield functools.partial(read, after, upto)


def _stored_lines(engine: Engine, label_filter: ExportFilter) -> Iterator[str]:
    """``stream_export`` of PRM800K lines, mostly copied from stored text.

    Chunk after chunk by keyset, not cut at ``chunk_ends`` as ``stored_line_reads`` does:
    read in turn the chunks need no ends found first, and that query is 17 ms of a 0.17 s
    pull of 10,000 labels on SQLite (BENCHMARKS.md, issue 40, session 24)."""
    after = 0
    while True:
        with transaction(engine) as session:
            after, text = line_chunk(session, label_filter, after)
        if not after:
            return
        yield text
