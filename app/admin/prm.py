"""The PRM as admins follow it: training runs and their figures, the current checkpoint,
the checkpoints on disk, the unlabeled pool the selections choose from, and the
generations they queued, with their yield beside a uniform pick's: the control share's."""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlalchemy import case, exists, false, func, select
from sqlalchemy.orm import Session

from app import estimates
from app.admin.charts import Series
from app.core.config import Settings
from app.figures import share
from app.models import (
    Generation,
    Label,
    QueueState,
    RunStatus,
    Solution,
    StepCompletion,
    TrainingRun,
    utc_now,
)
from app.pool_shape import chosen_strategy
from app.run_metrics import BestOfN, Figure, Gate, LeftOut, Pace, RunMetrics, Split, read_figure
from app.training import WarmUp, current_run, recent_runs, warm_up


@dataclass(frozen=True)
class RunSummary:
    """A run's headline figures, as the runs table and the current checkpoint's tiles show."""

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
    mode: str | None
    """The training mode: full, head or lora."""
    step_auroc: Figure | None
    processbench_f1: Figure | None
    best_of_n: BestOfN | None
    gate: Gate | None
    split: Split | None
    """The held-out split the run's figures are on."""
    left_out: list[LeftOut] | None
    """What its evaluation sets left out, and why (None: not recorded)."""
    skipped: str | None
    error: str | None
    checkpoint_path: str | None
    checkpoint_bytes: int | None
    pruned: bool
    """The run saved a checkpoint that has since been deleted."""
    pinned: bool
    is_current: bool

    @property
    def not_reached(self) -> str:
        """Why the run has no gate, evaluation or selection to show, in its state's words."""
        if self.skipped:
            return "the run was skipped"
        if self.status == RunStatus.REQUESTED.value:
            return "the run has not started"
        if self.status == RunStatus.RUNNING.value:
            return "not reached yet"
        if self.status == RunStatus.FAILED.value:
            return "the run stopped before it"
        return "none recorded"

    @property
    def error_line(self) -> str | None:
        """What went wrong, in a line: a traceback's last line names the exception, its
        first says only that a traceback follows."""
        lines = [line.strip() for line in (self.error or "").splitlines() if line.strip()]
        return lines[-1] if lines else None


@dataclass(frozen=True)
class RunDetail:
    """Everything a run recorded, for its own page."""

    run: RunSummary
    metrics: RunMetrics


@dataclass(frozen=True)
class CheckpointStorage:
    stored: int
    """Runs whose checkpoint is on disk."""
    total_bytes: int
    """Their size together (checkpoints saved before sizes were recorded count 0)."""
    pinned: int
    keep_last: int
    """Checkpoints kept besides the current and the pinned ones (``checkpoint_keep_last``)."""


@dataclass(frozen=True)
class Pool:
    """What the next selection chooses from: solutions no labeler has labeled and no
    generation has queued (with steps to score)."""

    left: int
    wrong_answer_candidates: int
    """Of them, graded wrong: the convincing-wrong-answer candidates."""
    ungraded: int
    """Of them, not graded yet (the worker grades them at its next run)."""
    problems: int
    next_generation: int
    """How many the next selection could queue: ``select_per_problem`` per problem (or
    ``select_global_top_k`` in all), at most ``generation_max_size``."""
    full_generation: int
    """How many a full generation holds."""
    wrong_answers_wanted: int
    """Wrong answers a full generation of the wrong-answer strategies asks for."""
    low: bool
    """The pool can no longer fill a full generation."""
    wrong_answers_low: bool
    """Too few wrong-answer candidates for the configured share (wrong-answer strategies),
    even if every ungraded solution turned out wrong: before the worker's first grading
    the pool has no candidates yet and is not short of them."""
    wrong_share: float
    """The share of a generation the wrong-answer strategies fill with wrong answers."""
    strategy: str
    """How the next generation is chosen (``select_strategy``, or the pool shape's pick)."""
    strategy_rule: str | None
    """Why, where the pool's shape chose it (``by_pool_shape``, app/pool_shape.py)."""
    per_selection: str
    """How many it takes: "4 per problem" or "the top 50 of the pool"."""
    control_share: float
    """The share of it drawn uniformly from the pool (``select_control_share``)."""


@dataclass(frozen=True)
class LabelYield:
    """Regular labels (quality control aside) made so far on some of a generation's
    solutions, and how many of them found an error."""

    labels: int
    negative_labels: int
    """Labels that rate a step of the solution -1."""

    @property
    def negative_yield(self) -> float | None:
        return share(self.negative_labels, self.labels)


@dataclass(frozen=True)
class GenerationYield:
    """A generation the PRM selected, and whether the selection found what it looks for,
    beside its control share: solutions drawn uniformly from the same pool."""

    number: int
    created_at: datetime
    run_id: int | None
    strategy: str | None
    selected: int
    """Solutions the strategy chose (the control share aside)."""
    wrong_answers: int
    answer_yield: float | None
    """Share of the selected solutions whose final answer is wrong."""
    pool_wrong_share: float | None
    """Share of wrong answers in the pool it was selected from: a uniform pick's yield."""
    control: int
    """Solutions drawn uniformly from the same pool beside the selected ones."""
    on_selected: LabelYield
    on_control: LabelYield
    control_auroc: Figure | None
    """The step AUROC, on the control labels, of the PRM that scored the pool."""
    scored_with: int | None
    """The run whose PRM that was."""

    @property
    def labels(self) -> int:
        return self.on_selected.labels + self.on_control.labels

    @property
    def negative_labels(self) -> int:
        return self.on_selected.negative_labels + self.on_control.negative_labels

    @property
    def negative_yield(self) -> float | None:
        return share(self.negative_labels, self.labels)


@dataclass(frozen=True)
class PrmStatus:
    runs: list[RunSummary]
    """Newest first."""
    current: RunSummary | None
    waiting: RunSummary | None
    """A requested run no worker has claimed yet."""
    warm_up: WarmUp | None
    """The worker's warm-up under way, which runs wait for."""
    running: RunSummary | None
    pace: Pace | None
    """The newest run's view of the open generation: whether a new one was due, and why."""
    pace_run_id: int | None
    checkpoints: CheckpointStorage
    pool: Pool
    generations: list[GenerationYield]
    """Newest first."""

    @property
    def gate_error(self) -> RunSummary | None:
        """The newest run that reached the gate, if its gate could not compare (the current
        checkpoint missing); a later run that compared ends the alarm."""
        judged = next((run for run in self.runs if run.gate), None)
        return judged if judged and judged.gate and judged.gate.error else None


def summarize(run: TrainingRun) -> RunSummary:
    return _summary(run, RunMetrics.read(run.metrics))


PROCESSBENCH_NOT_COMPUTED = (
    "not computed: the worker found no processbench_*.jsonl (STEPLABEL_EVAL_DIR)"
)
"""Why an evaluated run has no ProcessBench figure, where it did not record the reason."""


def _not_computed(metrics: RunMetrics) -> Figure | None:
    """No ProcessBench figure, and why, for a run that was evaluated; None for one that was
    not (skipped, failed or still running)."""
    if metrics.evaluation is None:
        return None
    return Figure(status=metrics.missing.get("processbench", PROCESSBENCH_NOT_COMPUTED))


def _summary(run: TrainingRun, metrics: RunMetrics) -> RunSummary:
    # A running run's time runs to now: its heartbeat comes only every few minutes.
    running = run.status == RunStatus.RUNNING.value
    end = utc_now() if running else run.finished_at or run.heartbeat_at
    evaluation = metrics.evaluation
    processbench = evaluation.processbench if evaluation else None
    return RunSummary(
        id=run.id,
        status=run.status,
        step=run.step,
        requested_at=run.requested_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        seconds=(end - run.started_at).total_seconds() if run.started_at and end else None,
        timings=dict(run.timings or {}),
        labels_used=run.labels_used if run.labels_used is not None else metrics.labels,
        mode=metrics.mode,
        step_auroc=evaluation.step_auroc if evaluation else None,
        processbench_f1=processbench.f1 if processbench else _not_computed(metrics),
        best_of_n=metrics.best_of_n,
        gate=metrics.gate,
        split=metrics.split,
        left_out=metrics.left_out,
        skipped=metrics.skipped,
        error=run.error,
        checkpoint_path=run.checkpoint_path,
        checkpoint_bytes=run.checkpoint_bytes,
        pruned=run.checkpoint_path is None and metrics.checkpoint_bytes is not None,
        pinned=run.pinned,
        is_current=run.is_current,
    )


def run_detail(run: TrainingRun) -> RunDetail:
    metrics = RunMetrics.read(run.metrics)
    return RunDetail(_summary(run, metrics), metrics)


def prm_status(session: Session, settings: Settings, limit: int = 50) -> PrmStatus:
    """The latest ``limit`` runs, the current checkpoint's run, the checkpoints on disk,
    the pool and every generation."""
    recent = [(run, RunMetrics.read(run.metrics)) for run in recent_runs(session, limit)]
    runs = [_summary(run, metrics) for run, metrics in recent]
    # The current checkpoint may be older than the runs listed.
    current = current_run(session)
    paced = next(((run.id, metrics.pace) for run, metrics in recent if metrics.pace), None)
    return PrmStatus(
        runs=runs,
        current=summarize(current) if current else None,
        waiting=_latest(runs, RunStatus.REQUESTED),
        warm_up=warm_up(session),
        running=_latest(runs, RunStatus.RUNNING),
        pace=paced[1] if paced else None,
        pace_run_id=paced[0] if paced else None,
        checkpoints=checkpoint_storage(session, settings.checkpoint_keep_last),
        pool=pool_status(session, settings),
        generations=generation_yields(session),
    )


def _latest(runs: list[RunSummary], status: RunStatus) -> RunSummary | None:
    return next((run for run in runs if run.status == status.value), None)


def checkpoint_storage(session: Session, keep_last: int) -> CheckpointStorage:
    """The checkpoints still on disk: how many, their size together, how many pinned."""
    stored, total_bytes, pinned = session.execute(
        select(
            func.count(),
            func.sum(TrainingRun.checkpoint_bytes),
            func.count().filter(TrainingRun.pinned.is_(True)),
        ).where(TrainingRun.checkpoint_path.is_not(None))
    ).one()
    return CheckpointStorage(stored, int(total_bytes or 0), pinned, keep_last)


def pool_status(session: Session, settings: Settings) -> Pool:
    """The unlabeled pool, counted as the worker's selection will find it, and whether it
    can still fill a generation."""
    per_problem = (
        select(
            func.count().label("left"),
            func.count().filter(Solution.answer_correct.is_(False)).label("wrong"),
            func.count().filter(Solution.answer_correct.is_(None)).label("ungraded"),
        )
        .where(
            Solution.queue_state == QueueState.NOT_QUEUED.value,
            Solution.steps.is_not(None),
            ~exists().where(Label.solution_id == Solution.id),
        )
        .group_by(Solution.problem_id)
        .subquery()
    )
    k = settings.select_per_problem
    left, wrong, ungraded, problems, takeable = session.execute(
        select(
            func.coalesce(func.sum(per_problem.c.left), 0),
            func.coalesce(func.sum(per_problem.c.wrong), 0),
            func.coalesce(func.sum(per_problem.c.ungraded), 0),
            func.count(),
            func.coalesce(func.sum(case((per_problem.c.left > k, k), else_=per_problem.c.left)), 0),
        )
    ).one()
    lefts = [int(n) for n in session.scalars(select(per_problem.c.left))]
    strategy, choice = chosen_strategy(settings.select_strategy, lefts)
    top_k = settings.select_global_top_k
    full = min(settings.generation_max_size, top_k or settings.generation_max_size)
    wanted = round(settings.select_wrong_share * full)
    wrong_strategy = strategy in ("convincing_wrong", "random_wrong")
    next_generation = min(full, int(left) if top_k else int(takeable))
    return Pool(
        left=int(left),
        wrong_answer_candidates=int(wrong),
        ungraded=int(ungraded),
        problems=problems,
        next_generation=next_generation,
        full_generation=full,
        wrong_answers_wanted=wanted,
        low=next_generation < full,
        wrong_answers_low=wrong_strategy and int(wrong) + int(ungraded) < wanted,
        wrong_share=settings.select_wrong_share,
        strategy=strategy,
        strategy_rule=choice.reason if choice else None,
        per_selection=f"the top {top_k} of the pool" if top_k else f"{k} per problem",
        control_share=settings.select_control_share,
    )


def generation_yields(session: Session) -> list[GenerationYield]:
    """Every generation with its yield of wrong answers and of labels that found an error,
    on the selected and on the control solutions apart, the pool's wrong-answer share when
    it was selected (from its run's metrics), and the step AUROC on the control labels."""
    own_negative_step = exists().where(
        StepCompletion.label_id == Label.id,
        StepCompletion.completion_index == 0,
        StepCompletion.rating == -1,
    )
    # Phase-1 labels have no solution, so none in a control share.
    is_control = func.coalesce(Solution.is_control, false()).label("is_control")
    labels = {
        (row.generation, bool(row.is_control)): LabelYield(row.labels, int(row.negative))
        for row in session.execute(
            select(
                Label.generation,
                is_control,
                func.count().label("labels"),
                func.coalesce(func.sum(case((own_negative_step, 1), else_=0)), 0).label("negative"),
            )
            .outerjoin(Solution, Solution.id == Label.solution_id)
            .where(Label.is_quality_control.is_(False), Label.generation.is_not(None))
            .group_by(Label.generation, is_control)
        )
    }
    aurocs = control_aurocs(session)
    rows = session.execute(
        select(Generation, TrainingRun.metrics)
        .outerjoin(TrainingRun, TrainingRun.id == Generation.run_id)
        .order_by(Generation.number.desc())
    )
    none = LabelYield(0, 0)
    yields = []
    for generation, run_metrics in rows:
        metrics = RunMetrics.read(run_metrics)
        selection = metrics.selection
        yields.append(
            GenerationYield(
                number=generation.number,
                created_at=generation.created_at,
                run_id=generation.run_id,
                strategy=selection.strategy if selection else None,
                selected=generation.selected,
                wrong_answers=generation.wrong_answers,
                answer_yield=share(generation.wrong_answers, generation.selected),
                pool_wrong_share=selection.pool_wrong_share if selection else None,
                control=generation.control,
                on_selected=labels.get((generation.number, False), none),
                on_control=labels.get((generation.number, True), none),
                control_auroc=aurocs.get(generation.number),
                scored_with=metrics.pool_scored_with,
            )
        )
    return yields


def control_aurocs(session: Session) -> dict[int, Figure]:
    """Per generation with a control share, the step AUROC (a step's P(-1) read as one
    minus its stored P(fine)) of the PRM that scored the pool, on the control solutions'
    labeled steps, resampling solutions; or why there is none.

    Their scores stay as the selecting run stored them: a queued solution is out of the
    pool, so no later run scores it again. Nothing is recomputed: no model is loaded."""
    rows = session.execute(
        select(
            Solution.generation,
            Solution.id,
            Solution.prm_step_scores,
            StepCompletion.step_index,
            StepCompletion.rating,
        )
        .join(Label, Label.solution_id == Solution.id)
        .join(StepCompletion, StepCompletion.label_id == Label.id)
        .where(
            Solution.is_control.is_(True),
            Label.is_quality_control.is_(False),
            StepCompletion.completion_index == 0,
        )
        .order_by(Solution.generation, Solution.id, Label.id, StepCompletion.step_index)
    )
    steps: dict[int, dict[int, list[tuple[float, int]]]] = defaultdict(lambda: defaultdict(list))
    for generation, solution_id, scores, index, rating in rows:
        if generation is not None and rating is not None and scores and index < len(scores):
            steps[generation][solution_id].append((1.0 - scores[index], rating))
    figures = {}
    for generation, by_solution in steps.items():
        labeled = estimates.StepSet(
            [np.array([p for p, _ in s]) for s in by_solution.values()],
            [np.array([r for _, r in s]) for s in by_solution.values()],
            units="control solutions",
        )
        figures[generation] = read_figure(estimates.step_auroc(labeled, seed=generation))
    return {g: e for g, e in figures.items() if e is not None}


@dataclass(frozen=True)
class RunCharts:
    """The lines of the PRM page's charts over the runs with figures, oldest first; a
    chart no run has figures for has no lines."""

    run_labels: list[str]
    step_auroc: list[Series]
    processbench_f1: list[Series]
    best_of_n: list[Series]


def run_charts(runs: Sequence[RunSummary]) -> RunCharts | None:
    """Each figure per run, with its interval, for those of ``runs`` (newest first, as
    listed) that were evaluated; None where none was."""
    evaluated = [
        run for run in reversed(runs) if run.step_auroc or run.processbench_f1 or run.best_of_n
    ]
    if not evaluated:
        return None
    picks = [run.best_of_n for run in evaluated]
    return RunCharts(
        run_labels=[str(run.id) for run in evaluated],
        step_auroc=_drawn([estimate_series("Step AUROC", [r.step_auroc for r in evaluated])]),
        processbench_f1=_drawn(
            [estimate_series("ProcessBench mean F1", [r.processbench_f1 for r in evaluated])]
        ),
        best_of_n=_drawn(
            [
                estimate_series("PRM pick", [p.prm if p else None for p in picks]),
                estimate_series("Majority vote", [p.majority if p else None for p in picks]),
                estimate_series("Random pick", [p.random if p else None for p in picks]),
            ]
        ),
    )


def _drawn(series: list[Series]) -> list[Series]:
    """The series, or none where not one of them has a value."""
    return series if any(v is not None for s in series for v in s.values) else []


def estimate_series(name: str, estimates: Sequence[Figure | None]) -> Series:
    """A chart line of recorded estimates, with their 95% intervals where recorded."""
    return Series(
        name,
        [e.value if e else None for e in estimates],
        intervals=[
            (e.low, e.high) if e and e.low is not None and e.high is not None else None
            for e in estimates
        ],
    )
