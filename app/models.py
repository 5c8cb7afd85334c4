"""The tables: users, problems, model solutions, labels and their per-step ratings.

Why one module over 500 lines: every table is in one module, as the FastAPI template keeps
them, so a migration (and the test that checks models and migrations agree) reads one file.

A PRM800K line maps onto them as follows (see app/prm800k.py for the conversion):
``question`` -> a Problem (and, in phase 2, the Solution that was labeled), ``label`` -> a
Label with one LabelStep per step and one StepCompletion per rated completion.
"""

import enum
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Double,
    FetchedValue,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Stable constraint names keep migrations identical on SQLite and Postgres.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQL NULL, not the JSON literal null, for absent values.
NullableJSON = JSON(none_as_null=True)


def utc_now() -> datetime:
    """Naive UTC, as PRM800K timestamps are written."""
    return datetime.now(UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Role(enum.StrEnum):
    LABELER = "labeler"
    ADMIN = "admin"


class QueueState(enum.StrEnum):
    NOT_QUEUED = "not_queued"
    """Not for labeling (for example, solutions that came with imported labels)."""
    OPEN = "open"
    """Waiting for labelers: fewer completed labels than its overlap asks for."""
    FULL = "full"
    """Labeled by as many labelers as its overlap asks for."""


class TaskStyle(enum.StrEnum):
    PHASE2 = "phase2"
    """Rate the steps one by one; a negative step ends the solution (PRM800K phase 2)."""
    PHASE1 = "phase1"
    """Rate every candidate of each step, then continue with one, or with your own step."""


SCREENING_GENERATION = -1
"""PRM800K's generation for the initial screening questions new labelers answer first."""
UNNUMBERED_GENERATION = -2
"""A generation filter only, never stored: the labels without a generation (phase 1's, as
in PRM800K), ``none`` in a URL."""


class FinishReason(enum.StrEnum):
    FOUND_ERROR = "found_error"
    SOLUTION = "solution"
    GIVE_UP = "give_up"
    BAD_PROBLEM = "bad_problem"


FIRST_ERROR_DECIDED = (FinishReason.FOUND_ERROR.value, FinishReason.SOLUTION.value)
"""Finish reasons of labels that went as far as the labeler could judge: their first error
(or that there is none) is comparable with another label's. A give-up or a bad problem may
hold a negative step (phase 1 rates candidates before going on) but decided nothing."""


class User(Base):
    __tablename__ = "users"
    __table_args__ = (CheckConstraint("role IN ('labeler', 'admin')", name="role"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True, default=lambda: str(uuid.uuid4()))
    name: Mapped[str] = mapped_column(String(120), unique=True)
    role: Mapped[str] = mapped_column(String(16), default=Role.LABELER.value)
    password_hash: Mapped[str | None] = mapped_column(String(255))
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    is_approved: Mapped[bool] = mapped_column(Boolean, default=False)
    """Past screening: regular tasks are open to this labeler."""
    session_version: Mapped[int] = mapped_column(Integer, default=0)
    """Bumped to end every session of this user (password reset, deactivation)."""
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utc_now)


class TokenScope(enum.StrEnum):
    """What an API token may do; its user's role still bounds it (app/auth/tokens.py)."""

    IMPORT = "import"
    EXPORT = "export"
    READ = "read"


class ApiToken(Base):
    """A bearer token for the JSON API, kept as its SHA-256 only (it is shown once)."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(120))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    """The token's first characters, to tell tokens apart on the Users page."""
    scopes: Mapped[str] = mapped_column(String(64))
    """Comma-separated TokenScope values."""
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utc_now)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)


class Problem(Base):
    """A MATH-style problem with its ground truth.

    ``content_key`` hashes text, answer and solution, so the same text with a different
    ground truth (PRM800K's screening questions carry none) stays a distinct row and
    round-trips exactly; ``text_key`` finds every row for one text.
    """

    __tablename__ = "problems"

    id: Mapped[int] = mapped_column(primary_key=True)
    content_key: Mapped[str] = mapped_column(String(64), unique=True)
    text_key: Mapped[str] = mapped_column(String(64), index=True)
    text: Mapped[str] = mapped_column(Text)
    ground_truth_solution: Mapped[str | None] = mapped_column(Text)
    ground_truth_answer: Mapped[str | None] = mapped_column(Text)
    subject: Mapped[str | None] = mapped_column(String(64), index=True)
    level: Mapped[int | None] = mapped_column(SmallInteger)
    source_id: Mapped[str | None] = mapped_column(String(255), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utc_now)

    solutions: Mapped[list["Solution"]] = relationship(back_populates="problem")


class Solution(Base):
    """A model-written solution, split into steps, waiting to be (or already) labeled."""

    __tablename__ = "solutions"
    __table_args__ = (
        CheckConstraint("queue_state IN ('not_queued', 'open', 'full')", name="queue_state"),
        CheckConstraint("style IN ('phase1', 'phase2')", name="style"),
        # The labeling queue: open solutions by generation, then queue order.
        Index("ix_solutions_queue", "queue_state", "generation", "id"),
        # The dashboard's progress per generation, read from the index alone.
        Index("ix_solutions_progress", "generation", "queue_state", "overlap", "completed_count"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    content_key: Mapped[str] = mapped_column(String(64), unique=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"), index=True)
    steps: Mapped[list[str] | None] = mapped_column(NullableJSON)
    answer: Mapped[str | None] = mapped_column(Text)
    verifier_score: Mapped[float | None] = mapped_column(Double)
    generator: Mapped[str | None] = mapped_column(String(255))
    source_id: Mapped[str | None] = mapped_column(String(255), index=True)
    generation: Mapped[int | None] = mapped_column(Integer)
    """The active-learning generation that queued this solution for labeling."""
    is_control: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """Queued as its generation's uniform control share: picked at random, not by a PRM."""
    alternatives: Mapped[list[list[str]] | None] = mapped_column(NullableJSON)
    """Per step, other candidate completions a labeler rates beside (or instead of) it."""
    style: Mapped[str] = mapped_column(String(8), default=TaskStyle.PHASE2.value)
    answer_correct: Mapped[bool | None] = mapped_column(Boolean)
    """The final answer graded against the problem's ground truth; null when ungraded."""
    grader_version: Mapped[str | None] = mapped_column(String(32))
    """The ``GRADER_VERSION`` that wrote ``answer_correct`` (undecided verdicts too)."""
    prm_score: Mapped[float | None] = mapped_column(Double)
    """The current PRM's score: the product over steps of P(positive) + P(neutral)."""
    prm_min_step: Mapped[float | None] = mapped_column(Double)
    prm_step_scores: Mapped[list[float] | None] = mapped_column(NullableJSON)
    scored_by_run_id: Mapped[int | None] = mapped_column(ForeignKey("training_runs.id"))
    queue_state: Mapped[str] = mapped_column(String(16), default=QueueState.NOT_QUEUED.value)
    overlap: Mapped[int | None] = mapped_column(Integer)
    """Distinct labelers wanted for this solution; null means the project's setting."""
    completed_count: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utc_now)
    prm800k_question: Mapped[str | None] = mapped_column(Text)
    """The ``question`` of its labels' PRM800K lines as JSON text, written when the solution
    is stored, so that a pull copies it (app/datasets/export.py). Built from this row and
    its problem's, which nothing changes once stored; null: built when pulled."""

    problem: Mapped[Problem] = relationship(back_populates="solutions")


class RunStatus(enum.StrEnum):
    REQUESTED = "requested"
    """Asked for by an admin or the schedule; a worker will claim it."""
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class TrainingRun(Base):
    """One worker cycle: train the PRM, evaluate it, score the pool, select a generation."""

    __tablename__ = "training_runs"
    __table_args__ = (
        CheckConstraint("status IN ('requested', 'running', 'succeeded', 'failed')", name="status"),
        Index("ix_training_runs_status_id", "status", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.REQUESTED.value)
    requested_at: Mapped[datetime] = mapped_column(DateTime, default=utc_now)
    requested_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    worker: Mapped[str | None] = mapped_column(String(255))
    """Which worker process ran it (host and pid)."""
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime)
    """Last sign of life of the worker running it; a stale one means the worker died."""
    step: Mapped[str | None] = mapped_column(String(32))
    """The cycle step in progress or last reached: train, evaluate, score, select."""
    error: Mapped[str | None] = mapped_column(Text)
    labels_used: Mapped[int | None] = mapped_column(Integer)
    metrics: Mapped[dict[str, Any] | None] = mapped_column(NullableJSON)
    timings: Mapped[dict[str, float] | None] = mapped_column(NullableJSON)
    """Seconds per cycle step."""
    checkpoint_path: Mapped[str | None] = mapped_column(Text)
    """Null when the run saved none, or when its checkpoint was pruned."""
    checkpoint_bytes: Mapped[int | None] = mapped_column(BigInteger)
    """The checkpoint's size on disk, as the worker measured it when saving."""
    is_current: Mapped[bool] = mapped_column(Boolean, default=False)
    """This run's checkpoint is the one that scores and selects."""
    pinned: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """Keep this run's checkpoint whatever the retention setting says."""


class JobStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ImportJob(Base):
    """An admin's upload, imported in the background (app/admin/jobs.py)."""

    __tablename__ = "import_jobs"
    __table_args__ = (
        CheckConstraint("status IN ('queued', 'running', 'succeeded', 'failed')", name="status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    status: Mapped[str] = mapped_column(String(16), default=JobStatus.QUEUED.value)
    kind: Mapped[str] = mapped_column(String(16))
    """What the file holds: prm800k, problems or solutions."""
    filename: Mapped[str] = mapped_column(String(255))
    skip_invalid: Mapped[bool] = mapped_column(Boolean, default=False)
    generation: Mapped[int] = mapped_column(Integer, default=0)
    queue: Mapped[bool] = mapped_column(Boolean, default=True)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utc_now)
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    lines_total: Mapped[int] = mapped_column(Integer, default=0)
    lines_done: Mapped[int] = mapped_column(Integer, default=0)
    summary: Mapped[str | None] = mapped_column(Text)
    """What the import did, once it succeeded."""
    error: Mapped[str | None] = mapped_column(Text)
    """Why nothing was imported: ``FILE:LINE: message`` for a bad line."""
    skipped: Mapped[list[str] | None] = mapped_column(NullableJSON)
    """Bad lines skipped with skip_invalid (the first few)."""


class Generation(Base):
    """An active-learning generation: the solutions one selection queued for labeling."""

    __tablename__ = "generations"

    number: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utc_now)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("training_runs.id"))
    """The run whose checkpoint selected it."""
    selected: Mapped[int] = mapped_column(Integer, default=0)
    """Solutions the selection strategy chose (the control share aside)."""
    wrong_answers: Mapped[int] = mapped_column(Integer, default=0)
    """Selected solutions whose final answer was graded wrong (the selection's yield)."""
    control: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Solutions queued beside the selected ones as the uniform control share."""
    quality_control: Mapped[int] = mapped_column(Integer, default=0)
    """Quality-control questions added to it when it opened."""


class Label(Base):
    """One labeler's work on one task: a PRM800K line."""

    __tablename__ = "labels"
    __table_args__ = (
        CheckConstraint(
            "finish_reason IN ('found_error', 'solution', 'give_up', 'bad_problem')",
            name="finish_reason",
        ),
        Index("ix_labels_labeler_id_timestamp", "labeler_id", "timestamp"),
        Index("ix_labels_generation_id", "generation", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    dedupe_key: Mapped[str] = mapped_column(String(64), unique=True)
    labeler_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"), index=True)
    solution_id: Mapped[int | None] = mapped_column(ForeignKey("solutions.id"), index=True)
    """Null for phase-1 labels, where steps were sampled live rather than pre-generated."""
    timestamp: Mapped[datetime] = mapped_column(DateTime, index=True)
    generation: Mapped[int | None] = mapped_column(Integer)
    is_quality_control: Mapped[bool] = mapped_column(Boolean, default=False)
    is_initial_screening: Mapped[bool] = mapped_column(Boolean, default=False)
    total_time: Mapped[int | None] = mapped_column(BigInteger)
    """Milliseconds spent on the task."""
    finish_reason: Mapped[str | None] = mapped_column(String(16))
    note: Mapped[str | None] = mapped_column(Text)
    """The labeler's reason for a bad problem or for giving up (not part of PRM800K)."""
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utc_now)
    written_xid: Mapped[int | None] = mapped_column(BigInteger, FetchedValue(), index=True)
    """Postgres: the transaction that wrote the label (``pg_current_xact_id()``, the
    column's default there), the position API pulls use as their cursor
    (app/datasets/cursor.py).
    Null on SQLite, where the id serves, and for labels stored before this column."""
    prm800k_label: Mapped[str | None] = mapped_column(Text)
    """The ``label`` of its PRM800K line (steps, total time, finish reason) as JSON text,
    written with the label, so that a pull copies it; the rows it is built from are never
    changed. Null (labels stored before this column): built when pulled."""
    source_id: Mapped[str | None] = mapped_column(String(255))
    """The ``external_id`` of an imported line that names no solution (phase 1), written
    back at export; a label of a solution shows its solution's ``source_id`` instead."""

    steps: Mapped[list["LabelStep"]] = relationship(
        order_by="LabelStep.step_index", cascade="all, delete-orphan"
    )


class LabelStep(Base):
    """One step of a label: its rated completions and what the labeler continued with."""

    __tablename__ = "label_steps"

    label_id: Mapped[int] = mapped_column(
        ForeignKey("labels.id", ondelete="CASCADE"), primary_key=True
    )
    step_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    chosen_completion: Mapped[int | None] = mapped_column(Integer)
    """Index into the completions; null when none was chosen (an error, or a human step)."""
    human_completion: Mapped[dict[str, Any] | None] = mapped_column(NullableJSON)
    """The labeler's own step (phase 1): ``{text, rating, source, flagged, ...}``."""

    completions: Mapped[list["StepCompletion"]] = relationship(
        order_by="StepCompletion.completion_index", cascade="all, delete-orphan"
    )


class StepCompletion(Base):
    """One candidate step and the rating a labeler gave it (-1, 0, +1 or unrated)."""

    __tablename__ = "step_completions"
    __table_args__ = (
        ForeignKeyConstraint(
            ["label_id", "step_index"],
            ["label_steps.label_id", "label_steps.step_index"],
            ondelete="CASCADE",
        ),
        CheckConstraint("rating IN (-1, 0, 1)", name="rating"),
        # Agreement reads the rating of each label's own steps (completion 0) from the
        # index alone, and the labels with a flagged step from a small partial index.
        Index(
            "ix_step_completions_own_rating",
            "label_id",
            "step_index",
            "rating",
            postgresql_where=text("completion_index = 0"),
            sqlite_where=text("completion_index = 0"),
        ),
        Index(
            "ix_step_completions_flagged",
            "label_id",
            postgresql_where=text("flagged IS TRUE"),
            sqlite_where=text("flagged IS 1"),
        ),
    )

    label_id: Mapped[int] = mapped_column(primary_key=True)
    step_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    completion_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    text: Mapped[str] = mapped_column(Text)
    rating: Mapped[int | None] = mapped_column(SmallInteger)
    flagged: Mapped[bool | None] = mapped_column(Boolean)


class Assignment(Base):
    """A task leased to a labeler: one solution to label before ``expires_at``.

    Regular tasks take one of the solution's ``overlap`` slots; the unique (solution, slot)
    pair makes it impossible, on any database, to hand out more slots than the overlap.
    Quality-control and screening tasks go to every labeler and take no slot.
    """

    __tablename__ = "assignments"
    __table_args__ = (
        # A labeler gets a solution once; a quality-control question once per generation.
        Index(
            "uq_assignments_solution_id_labeler_id",
            "solution_id",
            "labeler_id",
            unique=True,
            postgresql_where=text("qc_generation IS NULL"),
            sqlite_where=text("qc_generation IS NULL"),
        ),
        Index(
            "uq_assignments_quality_control_round",
            "solution_id",
            "labeler_id",
            "qc_generation",
            unique=True,
            postgresql_where=text("qc_generation IS NOT NULL"),
            sqlite_where=text("qc_generation IS NOT NULL"),
        ),
        UniqueConstraint("solution_id", "slot"),
        Index("ix_assignments_labeler_id_completed_at", "labeler_id", "completed_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    solution_id: Mapped[int] = mapped_column(ForeignKey("solutions.id"))
    labeler_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    slot: Mapped[int | None] = mapped_column(Integer)
    leased_at: Mapped[datetime] = mapped_column(DateTime)
    expires_at: Mapped[datetime] = mapped_column(DateTime)
    completed_at: Mapped[datetime | None] = mapped_column(DateTime)
    label_id: Mapped[int | None] = mapped_column(ForeignKey("labels.id"), unique=True)
    qc_generation: Mapped[int | None] = mapped_column(Integer)
    """The generation whose quality-control questions this task came from (its label's
    generation); null for every other task."""

    solution: Mapped[Solution] = relationship()
    labeler: Mapped[User] = relationship()


class GoldLabel(Base):
    """Marks a solution as a quality-control question, with the label taken as correct."""

    __tablename__ = "gold_labels"

    solution_id: Mapped[int] = mapped_column(ForeignKey("solutions.id"), primary_key=True)
    label_id: Mapped[int] = mapped_column(ForeignKey("labels.id"), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utc_now)


class GenerationQualityControl(Base):
    """A quality-control question added to a generation: served within it, once per labeler.

    The worker adds the QC questions there are when it opens a generation, and a question
    marked later joins the newest generation, so QC accuracy can be followed generation by
    generation, as in PRM800K, where QC labels carry the generation they were given in.
    """

    __tablename__ = "generation_quality_control"

    generation: Mapped[int] = mapped_column(Integer, primary_key=True)
    solution_id: Mapped[int] = mapped_column(
        ForeignKey("gold_labels.solution_id", ondelete="CASCADE"), primary_key=True
    )
    added_at: Mapped[datetime] = mapped_column(DateTime, default=utc_now)


class Adjudication(Base):
    """An adjudicator's final ratings of a solution's steps, which win over the labelers'
    consensus (app/consensus/); one per solution, replaced by a later decision."""

    __tablename__ = "adjudications"

    solution_id: Mapped[int] = mapped_column(
        ForeignKey("solutions.id", ondelete="CASCADE"), primary_key=True
    )
    ratings: Mapped[list[int]] = mapped_column(JSON)
    """Per step from the first, up to and including the first -1."""
    source_label_id: Mapped[int | None] = mapped_column(
        ForeignKey("labels.id", ondelete="SET NULL")
    )
    """The label whose ratings were taken; null when the adjudicator edited them."""
    adjudicator_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    decided_at: Mapped[datetime] = mapped_column(DateTime, default=utc_now)


class ProjectSetting(Base):
    """A project-wide value admins change at run time (guidelines, QC rate, ...)."""

    __tablename__ = "project_settings"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utc_now, onupdate=utc_now)


class LoginThrottle(Base):
    """Recent login attempts counted against one account (``address`` empty), one address
    (``name`` empty), or one account from one address; see app/auth/throttle.py."""

    __tablename__ = "login_throttles"

    name: Mapped[str] = mapped_column(String(120), primary_key=True)
    address: Mapped[str] = mapped_column(String(64), primary_key=True)
    attempts: Mapped[int] = mapped_column(Integer)
    last_attempt_at: Mapped[datetime] = mapped_column(DateTime, index=True)
    blocked_until: Mapped[datetime | None] = mapped_column(DateTime)


class AuditEntry(Base):
    """One admin action that changed data or access: who, when, what, before and after
    (app/audit.py writes them, in the transaction of the change)."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utc_now, index=True)
    actor_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    """The admin who did it; None for the command line (the machine's operator)."""
    actor: Mapped[str] = mapped_column(String(120))
    """Their name when they did it, or ``command line``."""
    action: Mapped[str] = mapped_column(String(64), index=True)
    """What was done, ``thing.verb``: ``user.reset_password``, ``qc.settings``, ..."""
    target: Mapped[str] = mapped_column(String(255))
    """What it was done to, in words: ``user alice``, ``solution 12``, a file's name."""
    before: Mapped[dict[str, Any] | None] = mapped_column(NullableJSON)
    after: Mapped[dict[str, Any] | None] = mapped_column(NullableJSON)


# The Core tables, for bulk statements that skip the ORM (imports, label submits).
PROBLEMS: Table = Problem.__table__  # type: ignore[assignment]
SOLUTIONS: Table = Solution.__table__  # type: ignore[assignment]
USERS: Table = User.__table__  # type: ignore[assignment]
LABELS: Table = Label.__table__  # type: ignore[assignment]
LABEL_STEPS: Table = LabelStep.__table__  # type: ignore[assignment]
STEP_COMPLETIONS: Table = StepCompletion.__table__  # type: ignore[assignment]
ASSIGNMENTS: Table = Assignment.__table__  # type: ignore[assignment]
GOLD_LABELS: Table = GoldLabel.__table__  # type: ignore[assignment]
GENERATION_QUALITY_CONTROL: Table = GenerationQualityControl.__table__  # type: ignore[assignment]
PROJECT_SETTINGS: Table = ProjectSetting.__table__  # type: ignore[assignment]
LOGIN_THROTTLES: Table = LoginThrottle.__table__  # type: ignore[assignment]
API_TOKENS: Table = ApiToken.__table__  # type: ignore[assignment]
ADJUDICATIONS: Table = Adjudication.__table__  # type: ignore[assignment]
