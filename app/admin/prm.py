"""The PRM as admins follow it: training runs and their metrics, the current checkpoint, and
the generations its selections queued, with their yield of wrong answers."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.admin.charts import Series
from app.models import Generation, Label, RunStatus, TrainingRun
from app.training import current_run, recent_runs

HEADLINE_METRICS = {
    "step_accuracy": "Step accuracy",
    "baseline_accuracy": "Majority-class baseline",
    "auroc_negative": "AUROC (negative vs rest)",
    "first_error_f1": "First-error F1",
    "best_of_n_prm": "Best-of-N: PRM pick",
    "best_of_n_majority": "Best-of-N: majority vote",
    "best_of_n_random": "Best-of-N: random pick",
    "selection_yield": "Selection yield",
}
"""The evaluation figures (worker/train.py, worker/evaluate.py) the dashboard shows."""


@dataclass(frozen=True)
class RunSummary:
    id: int
    status: str
    step: str | None
    requested_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    seconds: float | None
    """From start to finish, or to the last heartbeat of a run still going."""
    timings: dict[str, float]
    labels_used: int | None
    metrics: dict[str, float | None]
    """The HEADLINE_METRICS the run recorded (numbers only)."""
    error: str | None
    checkpoint_path: str | None
    is_current: bool


@dataclass(frozen=True)
class GenerationYield:
    number: int
    created_at: datetime
    run_id: int | None
    selected: int
    wrong_answers: int
    answer_yield: float | None
    """Share of the selected solutions whose final answer is wrong."""
    labels: int
    """Labels made so far on this generation."""


@dataclass(frozen=True)
class PrmStatus:
    runs: list[RunSummary]
    """Newest first."""
    current: RunSummary | None
    waiting: RunSummary | None
    """A requested run no worker has claimed yet."""
    running: RunSummary | None
    generations: list[GenerationYield]
    """Newest first."""


def summarize(run: TrainingRun) -> RunSummary:
    end = run.finished_at or run.heartbeat_at
    recorded = run.metrics or {}
    return RunSummary(
        id=run.id,
        status=run.status,
        step=run.step,
        requested_at=run.requested_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        seconds=(end - run.started_at).total_seconds() if run.started_at and end else None,
        timings=dict(run.timings or {}),
        labels_used=run.labels_used,
        metrics={key: _number(recorded.get(key)) for key in HEADLINE_METRICS if key in recorded},
        error=run.error,
        checkpoint_path=run.checkpoint_path,
        is_current=run.is_current,
    )


def metric_series(runs: list[RunSummary], keys: list[str]) -> list[Series]:
    """For a chart: per metric key, its value in each of ``runs``."""
    return [Series(HEADLINE_METRICS[key], [run.metrics.get(key) for run in runs]) for key in keys]


def _number(value: Any) -> float | None:
    # Metrics are JSON written by the worker: anything but a number shows as missing.
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if is_number else None


def prm_status(session: Session, limit: int = 50) -> PrmStatus:
    """The latest ``limit`` runs, the current checkpoint's run and every generation."""
    runs = [summarize(run) for run in recent_runs(session, limit)]
    # The current checkpoint may be older than the runs listed.
    current = current_run(session)
    return PrmStatus(
        runs=runs,
        current=summarize(current) if current else None,
        waiting=_latest(runs, RunStatus.REQUESTED),
        running=_latest(runs, RunStatus.RUNNING),
        generations=generation_yields(session),
    )


def _latest(runs: list[RunSummary], status: RunStatus) -> RunSummary | None:
    return next((run for run in runs if run.status == status.value), None)


def generation_yields(session: Session) -> list[GenerationYield]:
    labels = (
        select(func.count())
        .where(Label.generation == Generation.number)
        .correlate(Generation)
        .scalar_subquery()
    )
    rows = session.execute(
        select(
            Generation.number,
            Generation.created_at,
            Generation.run_id,
            Generation.selected,
            Generation.wrong_answers,
            labels.label("labels"),
        ).order_by(Generation.number.desc())
    )
    return [
        GenerationYield(
            **row._asdict(),
            answer_yield=row.wrong_answers / row.selected if row.selected else None,
        )
        for row in rows
    ]
