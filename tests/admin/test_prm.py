"""The PRM pages: runs and their figures with intervals, a run's own page, checkpoints and
pinning, the unlabeled pool, and the generations' yield beside a uniform pick's."""

import itertools
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.admin.prm import (
    CheckpointStorage,
    checkpoint_storage,
    generation_yields,
    pool_status,
    prm_status,
    run_charts,
)
from app.core.config import Settings, get_settings
from app.core.db import transaction
from app.models import Generation, Problem, QueueState, RunStatus, Solution, TrainingRun
from app.pool_shape import BY_POOL_SHAPE, strategy_for_pool
from app.run_metrics import Figure, RunMetrics
from app.training import (
    WARM_UP_SILENT_AFTER,
    note_warm_up,
    request_run,
    set_pinned,
    warm_up,
)
from tests.admin.conftest import HTMX, Admin
from tests.factories import make_label, make_solution, make_user, prm_run_metrics
from tests.web import add_user, log_in

START = datetime(2026, 5, 1, 9)
NOT_ENOUGH = "not enough data: 3 held-out problems (needs 5)"
SETTINGS = Settings()
STEPS = ["Step.", "# Answer\n\n1"]


def add_run(
    session: Session, status: RunStatus = RunStatus.SUCCEEDED, **fields: Any
) -> TrainingRun:
    run = TrainingRun(status=status.value, requested_at=START, **fields)
    session.add(run)
    session.flush()
    return run


def stored_run(session: Session, **fields: Any) -> TrainingRun:
    """A finished run with the worker's whole metrics and its checkpoint on disk."""
    stored = {
        "started_at": START,
        "finished_at": START + timedelta(minutes=3, seconds=30),
        "metrics": prm_run_metrics(),
        "timings": {"train": 150.0, "evaluate": 60.0},
        "labels_used": 180,
        "checkpoint_path": "checkpoints/run-x",
        "checkpoint_bytes": 540_000_000,
    }
    return add_run(session, **(stored | fields))


# Figures, read from a run's metrics


def test_runs_newest_first_with_their_figures_and_intervals(session: Session) -> None:
    old = stored_run(session, is_current=True)
    failed = add_run(
        session,
        RunStatus.FAILED,
        started_at=START + timedelta(hours=1),
        heartbeat_at=START + timedelta(hours=1, seconds=12),
        error="out of memory",
        metrics={"evaluation": {"step_auroc": {"value": "high", "n": 3}}, "gate": "yes"},
    )
    waiting = request_run(session)

    status = prm_status(session, SETTINGS)
    assert [run.id for run in status.runs] == [waiting.id, failed.id, old.id]
    summary = status.runs[2]
    assert summary.step_auroc == Figure(
        value=0.712, low=0.712 - 0.052, high=0.712 + 0.038, n=12, status="ok"
    )
    assert summary.processbench_f1 == Figure(
        value=0.412, low=0.412 - 0.06, high=0.412 + 0.055, n=240
    )
    recorded = RunMetrics.read(prm_run_metrics()).evaluation
    assert recorded is not None
    assert summary.best_of_n is not None and summary.best_of_n == recorded.best_of_n
    assert summary.best_of_n.prm == Figure(value=0.625, low=0.475, high=0.775, n=40)
    assert summary.best_of_n.majority == Figure(value=0.55, low=0.4, high=0.7, n=40)
    assert summary.best_of_n.random == Figure(value=0.41, low=0.33, high=0.49, n=40)
    assert summary.gate is not None and summary.gate.promote and summary.gate.metric == "step_auroc"
    assert summary.gate.reason.startswith("promoted: step_auroc 0.712 [0.660, 0.750] against")
    assert (summary.mode, summary.labels_used, summary.checkpoint_bytes) == (
        "head",
        180,
        540_000_000,
    )
    assert (summary.seconds, summary.timings) == (210.0, {"train": 150.0, "evaluate": 60.0})
    # Malformed figures read as missing, never as an error.
    assert (status.runs[1].step_auroc, status.runs[1].gate, status.runs[1].seconds) == (
        None,
        None,
        12.0,
    )
    assert status.runs[0].seconds is None and status.runs[0].best_of_n is None
    assert status.current is not None and status.current.id == old.id
    assert status.waiting is not None and status.waiting.id == waiting.id
    assert status.running is None
    assert status.pace is not None and status.pace_run_id == old.id
    assert status.pace.reason == "generation 3 is 40% labeled; the next is queued at 80%"


def test_not_enough_data_is_a_status_not_a_figure(session: Session) -> None:
    metrics = prm_run_metrics()
    metrics["evaluation"]["step_auroc"] = {"status": NOT_ENOUGH}
    metrics["evaluation"]["best_of_n"] = {"status": "not enough data: no problem with two"}
    run = stored_run(session)
    run.metrics = metrics
    skipped = add_run(session, metrics={"examples": 12, "labels": 9, "skipped": "9 labels"})
    old = add_run(session, metrics={"step_accuracy": 0.8, "auroc_negative": 0.7})

    figures = {summary.id: summary for summary in prm_status(session, SETTINGS).runs}
    assert figures[run.id].step_auroc == Figure(status=NOT_ENOUGH)
    best = figures[run.id].best_of_n
    assert best is not None and best.status == "not enough data: no problem with two"
    assert best.prm is None
    assert (figures[skipped.id].skipped, figures[skipped.id].labels_used) == ("9 labels", 9)
    # Runs of the old worker have none of the figures the page shows.
    assert figures[old.id].step_auroc is None and figures[old.id].gate is None


def test_the_current_checkpoint_older_than_the_runs_listed(session: Session) -> None:
    current = add_run(session, is_current=True)
    for _ in range(3):
        add_run(session, RunStatus.FAILED)
    status = prm_status(session, SETTINGS, limit=2)
    assert current.id not in [run.id for run in status.runs]
    assert status.current is not None and status.current.id == current.id


def test_run_charts_draw_each_figure_with_its_interval(session: Session) -> None:
    first = stored_run(session)
    add_run(session, RunStatus.FAILED)  # never evaluated: not on the charts
    later = stored_run(session)
    later.metrics = prm_run_metrics(auroc=0.75)
    charts = run_charts(prm_status(session, SETTINGS).runs)
    assert charts is not None and charts.run_labels == [str(first.id), str(later.id)]
    (auroc,) = charts.step_auroc
    assert auroc.values == [0.712, 0.75]
    assert auroc.intervals == [
        pytest.approx((0.712 - 0.052, 0.712 + 0.038)),
        pytest.approx((0.75 - 0.052, 0.75 + 0.038)),
    ]
    assert [s.name for s in charts.best_of_n] == ["PRM pick", "Majority vote", "Random pick"]
    assert [s.values for s in charts.best_of_n] == [[0.625] * 2, [0.55] * 2, [0.41] * 2]
    assert run_charts([]) is None


# Checkpoints


def test_checkpoints_on_disk_and_pruned(session: Session) -> None:
    pinned = stored_run(session, pinned=True)
    stored_run(session, checkpoint_bytes=1_000)
    pruned = add_run(session, metrics={"checkpoint_bytes": 700})
    never = add_run(session, metrics={"skipped": "9 labels"})
    assert checkpoint_storage(session, keep_last=3) == CheckpointStorage(2, 540_001_000, 1, 3)
    figures = {summary.id: summary for summary in prm_status(session, SETTINGS).runs}
    assert (figures[pinned.id].pinned, figures[pinned.id].pruned) == (True, False)
    assert figures[pruned.id].pruned and not figures[never.id].pruned


def test_pin_and_unpin(session: Session) -> None:
    run = stored_run(session)
    set_pinned(run, pinned=True)
    session.flush()
    assert session.scalar(select(TrainingRun.pinned).where(TrainingRun.id == run.id)) is True
    set_pinned(run, pinned=False)
    session.flush()
    assert session.scalar(select(TrainingRun.pinned).where(TrainingRun.id == run.id)) is False
    pruned = add_run(session, metrics={"checkpoint_bytes": 700})
    with pytest.raises(ValueError, match="no checkpoint on disk"):
        set_pinned(pruned, pinned=True)
    assert pruned.pinned is False


# The pool


_pool_keys = itertools.count()


def add_to_pool(
    session: Session,
    problem: Problem,
    correct: bool | None,
    *,
    queue_state: QueueState = QueueState.NOT_QUEUED,
    steps: list[str] | None = STEPS,
) -> Solution:
    """An unqueued solution of ``problem`` whose answer is graded ``correct``."""
    solution = Solution(
        content_key=f"pool-{next(_pool_keys)}-{id(session)}",
        problem_id=problem.id,
        steps=steps,
        answer="1",
        answer_correct=correct,
        generation=None,
        queue_state=queue_state.value,
    )
    session.add(solution)
    session.flush()
    return solution


def test_pool_counts_what_the_selection_can_take(session: Session) -> None:
    one, two = (make_solution(session).problem for _ in range(2))
    for correct in (False, False, True, None, False):
        add_to_pool(session, one, correct)
    add_to_pool(session, two, False)
    # Not in the pool: labeled, queued, or without steps to score.
    labeled = add_to_pool(session, two, False)
    make_label(session, make_user(session, "ann"), labeled, [[1]])
    add_to_pool(session, two, False, queue_state=QueueState.OPEN)
    add_to_pool(session, two, False, steps=None)

    settings = Settings(select_per_problem=2, generation_max_size=3, select_wrong_share=0.5)
    pool = pool_status(session, settings)
    assert (pool.left, pool.wrong_answer_candidates, pool.ungraded, pool.problems) == (6, 4, 1, 2)
    # 2 from the first problem and 1 from the second fill a generation of 3.
    assert (pool.next_generation, pool.full_generation, pool.low) == (3, 3, False)
    assert (pool.wrong_answers_wanted, pool.wrong_answers_low) == (2, False)

    bigger = pool_status(session, Settings(select_per_problem=2, generation_max_size=400))
    assert (bigger.next_generation, bigger.low, bigger.wrong_answers_low) == (3, True, True)
    top_k = pool_status(session, Settings(select_global_top_k=5, generation_max_size=400))
    assert (top_k.next_generation, top_k.full_generation, top_k.low) == (5, 5, False)
    uniform = pool_status(session, Settings(select_strategy="uniform", generation_max_size=400))
    assert uniform.low and not uniform.wrong_answers_low


def test_a_pool_not_graded_yet_is_not_short_of_wrong_answers(session: Session) -> None:
    """Before the worker's first grading no solution is a candidate yet: no warning."""
    problem = make_solution(session).problem
    for correct in (None, None, None, False):
        add_to_pool(session, problem, correct)
    settings = Settings(select_per_problem=4, generation_max_size=4, select_wrong_share=1.0)

    pool = pool_status(session, settings)

    assert (pool.wrong_answer_candidates, pool.ungraded, pool.wrong_answers_wanted) == (1, 3, 4)
    assert not pool.wrong_answers_low
    # Short even if the 3 ungraded turn out wrong: warned.
    bigger = Settings(select_per_problem=6, generation_max_size=6, select_wrong_share=1.0)
    short = pool_status(session, bigger)
    assert short.wrong_answers_wanted == 6 and short.wrong_answers_low


def test_an_empty_pool_is_low(session: Session) -> None:
    pool = pool_status(session, SETTINGS)
    assert (pool.left, pool.problems, pool.next_generation, pool.low) == (0, 0, 0, True)


# Generations


def test_generation_yields_beside_a_uniform_pick(session: Session) -> None:
    metrics = prm_run_metrics()
    metrics["selection"] = {
        "strategy": "convincing_wrong",
        "queued": 4,
        "yield": 0.75,
        "pool_wrong_share": 0.25,
        "reason": "generation 1 is 85% labeled",
    }
    run = stored_run(session)
    run.metrics = metrics
    session.add_all(
        [
            Generation(number=1, run_id=run.id, selected=4, wrong_answers=3),
            Generation(number=2, selected=0, wrong_answers=0),
        ]
    )
    ann, bob = make_user(session, "ann"), make_user(session, "bob")
    found, clean = make_solution(session, generation=1), make_solution(session, generation=1)
    make_label(session, ann, found, [[1], [-1]], finish_reason="found_error")
    make_label(session, bob, found, [[-1]], finish_reason="found_error")
    # A -1 on another candidate step is not an error in the solution.
    make_label(session, ann, clean, [[1], [1, -1]])
    # Quality-control answers are no part of the selection.
    make_label(session, bob, clean, [[-1]], quality_control=True)
    make_label(session, ann, make_solution(session, generation=0), [[-1]])

    newest, first = generation_yields(session)
    assert (newest.number, newest.strategy, newest.pool_wrong_share) == (2, None, None)
    assert (newest.answer_yield, newest.labels, newest.negative_yield) == (None, 0, None)
    assert (first.number, first.run_id, first.strategy) == (1, run.id, "convincing_wrong")
    assert (first.selected, first.wrong_answers, first.answer_yield) == (4, 3, 0.75)
    assert first.pool_wrong_share == 0.25
    assert (first.labels, first.negative_labels, first.negative_yield) == (3, 2, 2 / 3)


# Over HTTP


def seed_runs(engine: Engine) -> dict[str, int]:
    """A current run with every figure, a newer one kept out by the gate with too little
    data for a step AUROC, and a pruned one; and a pool of one solution."""
    with transaction(engine) as session:
        pruned = add_run(session, metrics={"checkpoint_bytes": 700, "labels": 60})
        current = stored_run(session, is_current=True, checkpoint_bytes=540_000_000)
        kept = prm_run_metrics(auroc=0.69)
        kept["evaluation"]["step_auroc"] = {"status": NOT_ENOUGH}
        newer = stored_run(session, checkpoint_bytes=2_048)
        newer.metrics = kept
        problem = make_solution(session).problem
        add_to_pool(session, problem, False)
        return {"pruned": pruned.id, "current": current.id, "newer": newer.id}


def test_prm_page_shows_figures_with_intervals(admin: Admin, engine: Engine) -> None:
    runs = seed_runs(engine)
    page = admin.client.get("/admin/prm").text
    current = re.search(r'id="current-step-auroc">(.*?)</dd>', page, re.S)
    assert current and re.sub(r"<[^>]+>|\s+", " ", current.group(1)).split() == [
        "0.712",
        "[0.660,",
        "0.750]",
    ]
    assert "[0.352, 0.467]" in page  # ProcessBench mean F1's interval
    assert "n = 240" in page
    assert "62.5%" in page and "[47.5%, 77.5%]" in page and "majority 55.0%" in page
    assert "promoted: step_auroc 0.712 [0.660, 0.750] against 0.700" in page
    assert NOT_ENOUGH in page
    assert "kept current" in page  # the newer run's gate verdict
    # Checkpoints: per run, in all, and the pruned one.
    assert "515 MiB" in page and "2.00 KiB" in page
    storage = re.search(r'id="checkpoint-storage">(.*?)</p>', page, re.S)
    assert storage and "2 checkpoints on disk" in storage.group(1)
    pruned_row = page[page.index(f'id="run-{runs["pruned"]}"') :].split("</tr>")[0]
    assert "pruned" in pruned_row and "Pin" not in pruned_row
    for run in runs.values():
        assert f'href="/admin/prm/runs/{run}"' in page
    assert "Pace at" in page and "generation 3 is 40% labeled; the next is queued at 80%" in page
    assert "The pool runs low" in page
    strategy = re.search(r'id="selection-strategy">(.*?)</p>', page, re.S)
    assert strategy, "the page names how the next generation is chosen"
    said = " ".join(re.sub(r"<[^>]+>", " ", strategy.group(1)).split())
    # The default setting reads the pool's shape, and the page says what it read.
    assert get_settings().select_strategy == BY_POOL_SHAPE
    shape = re.search(r"=by_pool_shape: your pool has ([\d.]+) unlabeled samples? per", said)
    assert shape, said
    choice = strategy_for_pool([float(shape.group(1))])
    assert f"chosen by {choice.strategy} ( STEPLABEL_SELECT_STRATEGY" in said
    pick = f"shape of {choice.measured_at} per problem in BENCHMARKS.md: {choice.strategy}, "
    assert pick in said
    assert "4 per problem" in said and "10% of them a control share" in said
    for title in ("Step AUROC per run", "ProcessBench mean F1 per run", "Best of N per run"):
        assert title in page
    assert 'class="interval series-0"' in page  # the charts' whiskers


def test_run_page_shows_the_gate_every_argument_and_the_evaluation(
    admin: Admin, engine: Engine
) -> None:
    runs = seed_runs(engine)
    response = admin.client.get(f"/admin/prm/runs/{runs['current']}")
    assert response.status_code == 200
    page = response.text
    metrics = prm_run_metrics()
    assert metrics["gate"]["reason"] in page
    arguments = page[page.index('id="training-args"') : page.index('id="training-stats"')]
    shown = dict(re.findall(r"<code>(\w+)</code></th><td><code>([^<]*)</code>", arguments))
    assert shown.keys() == metrics["training_args"].keys()
    assert (shown["learning_rate"], shown["bf16"], shown["gradient_checkpointing"]) == (
        "0.001",
        "unset",
        "no",
    )
    # Loss per epoch: the first and the last, and every one in the chart's table.
    assert "0.9120 → 0.5230 in 3 epochs" in page
    assert "<title id=" in page and "Loss per epoch</title>" in page
    assert "Labeled steps" in page and "812" in page
    # Every label's examples, held-out ones too, beside those trained on.
    assert "<dt>Examples</dt><dd>240 <span" in page and "190 trained on" in page
    assert "18,130" in page and "e+04" not in page  # a large float whole, not in e-notation
    assert "chosen on a separate calibration part" in page and "0.481" in page
    assert page.count('<th scope="row">gsm8k</th>') == 2  # this run, and the current one
    assert "The current PRM, same sets" in page and "0.700" in page
    assert "Held-out problems" in page
    assert "generation 3 is 40% labeled; the next is queued at 80%" in page
    assert "Unpin" not in page and "Pin run" in page

    assert admin.client.get("/admin/prm/runs/999999").status_code == 404
    api = admin.client.get(f"/api/admin/prm/runs/{runs['current']}")
    assert api.json()["metrics"]["training_args"] == metrics["training_args"]
    assert api.json()["run"]["step_auroc"]["value"] == 0.712
    assert admin.client.get("/api/admin/prm/runs/999999").status_code == 404


def test_the_json_api_gives_the_new_figures(admin: Admin, engine: Engine) -> None:
    runs = seed_runs(engine)
    answer = admin.client.get("/api/admin/prm").json()
    assert answer["current"]["id"] == runs["current"]
    assert answer["current"]["step_auroc"] == {
        "value": 0.712,
        "low": pytest.approx(0.66),
        "high": pytest.approx(0.75),
        "n": 12,
        "status": None,
    }
    assert answer["current"]["best_of_n"]["prm"]["value"] == 0.625
    assert answer["current"]["gate"]["promote"] is True
    assert answer["runs"][0]["step_auroc"]["status"] == NOT_ENOUGH
    assert answer["checkpoints"]["total_bytes"] == 540_000_000 + 2_048
    assert (answer["pool"]["left"], answer["pool"]["low"]) == (1, True)
    assert answer["pace"]["reason"] == "generation 3 is 40% labeled; the next is queued at 80%"


def pinned(engine: Engine, run_id: int) -> bool:
    with Session(engine) as session:
        return bool(session.scalar(select(TrainingRun.pinned).where(TrainingRun.id == run_id)))


def test_pin_and_unpin_over_http(admin: Admin, engine: Engine) -> None:
    runs = seed_runs(engine)
    pin = admin.post(f"/admin/prm/runs/{runs['newer']}/pin")
    assert pin.status_code == 200 and pin.headers["HX-Trigger"] == "dashboard-refresh"
    assert "is pinned" in pin.text and pinned(engine, runs["newer"])
    row = admin.client.get("/admin/prm").text.split(f'id="run-{runs["newer"]}"')[1]
    assert "Unpin run" in row.split("</tr>")[0]
    unpin = admin.post(f"/admin/prm/runs/{runs['newer']}/unpin")
    assert unpin.status_code == 200 and not pinned(engine, runs["newer"])

    refused = admin.post(f"/admin/prm/runs/{runs['pruned']}/pin")
    assert refused.status_code == 422 and "no checkpoint on disk" in refused.text
    assert not pinned(engine, runs["pruned"])
    assert admin.post("/admin/prm/runs/999999/pin").status_code == 404
    forged = admin.client.post(
        f"/admin/prm/runs/{runs['newer']}/pin", headers={**HTMX, "X-CSRF-Token": "forged"}
    )
    assert forged.status_code == 403 and not pinned(engine, runs["newer"])


def test_pinning_is_for_admins(app_client: TestClient, engine: Engine) -> None:
    runs = seed_runs(engine)
    url = f"/admin/prm/runs/{runs['newer']}/pin"
    anonymous = app_client.post(url, follow_redirects=False)
    assert anonymous.status_code in (303, 403)
    add_user(engine, "alice")
    token = log_in(app_client, "alice")
    labeler = app_client.post(url, headers={**HTMX, "X-CSRF-Token": token})
    assert labeler.status_code == 403
    assert not pinned(engine, runs["newer"])


def test_the_overview_warns_of_a_low_pool(admin: Admin, engine: Engine) -> None:
    seed_runs(engine)
    page = admin.client.get("/admin").text
    tile = re.search(r'id="pool-left">(.*?)</dd>', page, re.S)
    assert tile and tile.group(1).strip() == "1"
    assert "1 wrong-answer candidate · runs low" in page
    assert "The pool runs low: the next generation could take only 1 of the 400" in page


# Figures a user can trust (issue 25) and the control share (issue 24)


def test_generation_yields_for_the_selected_and_the_control_labels_apart(
    session: Session,
) -> None:
    """The control share's negatives per label beside the selection's, and the step AUROC
    on the control labels of the PRM that scored them, from the scores stored then."""
    metrics = prm_run_metrics()
    metrics["selection"] = {"strategy": "convincing_wrong", "queued": 4, "control": 2}
    metrics["pool_scored_with"] = 7
    run = stored_run(session)
    run.metrics = metrics
    session.add(Generation(number=1, run_id=run.id, selected=2, wrong_answers=2, control=6))
    ann = make_user(session, "ann")
    for _ in range(2):
        picked = make_solution(session, generation=1)
        make_label(session, ann, picked, [[1], [-1]], finish_reason="found_error")
    # Six control solutions of two steps: the PRM put P(fine) 0.2 on the four second steps
    # rated -1, 0.9 on the other steps rated +1, save one it doubted (0.3).
    for index in range(6):
        control = make_solution(session, generation=1)
        control.is_control = True
        wrong = index < 4
        control.prm_step_scores = [0.9, 0.2 if wrong else (0.3 if index == 5 else 0.9)]
        make_label(session, ann, control, [[1], [-1 if wrong else 1]])
    # One of three steps, labeled to its second; and one without stored scores: a label,
    # but not in the figure.
    extra = make_solution(session, generation=1, steps=["a", "b", "c"])
    extra.is_control = True
    extra.prm_step_scores = [0.95, 0.1, 0.1]
    make_label(session, ann, extra, [[1], [-1]])
    unscored = make_solution(session, generation=1)
    unscored.is_control = True
    make_label(session, ann, unscored, [[1], [-1]])

    (generation,) = generation_yields(session)

    assert (generation.selected, generation.control) == (2, 6)
    assert (generation.on_selected.labels, generation.on_selected.negative_yield) == (2, 1.0)
    assert (generation.on_control.labels, generation.on_control.negative_labels) == (8, 6)
    assert generation.labels == 10 and generation.scored_with == 7
    auroc = generation.control_auroc
    # P(-1) = 1 - P(fine): the five -1 steps 0.8 or 0.9, the nine others at most 0.7.
    assert auroc is not None and auroc.value == pytest.approx(1.0)
    assert auroc.n == 7 and auroc.low is not None and auroc.low <= auroc.value


def test_too_few_control_labels_give_no_auroc(session: Session) -> None:
    session.add(Generation(number=1, selected=0, control=1))
    control = make_solution(session, generation=1)
    control.is_control, control.prm_step_scores = True, [0.9, 0.2]
    make_label(session, make_user(session, "ann"), control, [[1], [-1]])

    (generation,) = generation_yields(session)

    assert generation.control_auroc == Figure(
        status="not enough data: 1 control solutions (needs 5)"
    )


def test_the_prm_page_shows_left_outs_the_split_the_deciding_metric_and_the_control_share(
    admin: Admin, engine: Engine
) -> None:
    runs = seed_runs(engine)
    with transaction(engine) as session:
        session.add(Generation(number=5, run_id=runs["current"], selected=90, control=10))
    page = admin.client.get("/admin/prm").text
    row = page[page.index(f'id="run-{runs["current"]}"') :].split("</tr>")[0]
    assert "3 problems of the best-of-N samples (a problem this run&#39;s PRM trained on)" in row
    assert "seed 0, 20.0% held out" in row and "problem-hash/1 seed=0 held_out=0.2" in row
    assert "promoted" in row and "on step_auroc" in row
    generation = page[page.index('id="generation-5"') :].split("</tr>")[0]
    assert '<td class="num control">10</td>' in generation
    assert "Step AUROC on the control labels" in page
    assert 'id="gate-error"' not in page

    run_page = admin.client.get(f"/admin/prm/runs/{runs['current']}").text
    assert "problem-hash/1 seed=0 held_out=0.2" in run_page
    left_out = run_page[run_page.index('id="left-out"') :].split("</table>")[0]
    assert "Best-of-N problems (independent samples)" in left_out and "3 problems" in left_out
    assert '<dd id="deciding-metric">step_auroc</dd>' in run_page
    assert "must be better or equal" in run_page and "0.020" in run_page
    assert 'id="gate-metrics"' in run_page and "best_of_n not judged: no best-of-N samples" in (
        run_page
    )


def test_a_missing_current_checkpoint_is_an_error_on_the_prm_page(
    admin: Admin, engine: Engine
) -> None:
    runs = seed_runs(engine)
    error = f"the current checkpoint (run {runs['current']}) is missing: checkpoints/run-x"
    with transaction(engine) as session:
        metrics = prm_run_metrics()
        metrics["gate"] = {
            "promote": False,
            "reason": f"kept the current model: {error}",
            "metric": None,
            "error": error,
        }
        later = stored_run(session, metrics=metrics)

    page = admin.client.get("/admin/prm").text
    notice = page[page.index('id="gate-error"') :].split("</p>")[0]
    assert f"Run {later.id}</a> could not be compared with the current model: {error}" in notice
    row = page[page.index(f'id="run-{later.id}"') :].split("</tr>")[0]
    assert "not compared" in row and "promoted" not in row
    run_page = admin.client.get(f"/admin/prm/runs/{later.id}").text
    assert f"Not compared: {error}" in run_page
    # A run that compared since (the checkpoint back on disk) ends the alarm.
    with transaction(engine) as session:
        stored_run(session, metrics=prm_run_metrics(auroc=0.6))
    assert 'id="gate-error"' not in admin.client.get("/admin/prm").text


def test_a_run_shows_its_step_only_while_it_matters(admin: Admin, engine: Engine) -> None:
    """The step a failed run stopped at says where; a succeeded run's last step says
    nothing (it read as if the run were still selecting)."""
    with transaction(engine) as session:
        done = stored_run(session, step="select").id
        failed = add_run(session, RunStatus.FAILED, step="train", error="out of memory").id
    page = admin.client.get("/admin/prm").text
    rows = {run: page[page.index(f'id="run-{run}"') :].split("</tr>")[0] for run in (done, failed)}
    assert "· select" not in rows[done] and "succeeded" in rows[done]
    assert "failed</span> · train" in rows[failed]
    detail = admin.client.get(f"/admin/prm/runs/{done}").text
    assert "· select" not in detail


def test_a_running_runs_time_runs_to_now_not_to_its_last_heartbeat(session: Session) -> None:
    now = datetime.now(UTC).replace(tzinfo=None)
    started, beat = now - timedelta(minutes=5), now - timedelta(minutes=2)
    add_run(session, RunStatus.RUNNING, started_at=started, heartbeat_at=beat, step="train")
    [running] = prm_status(session, Settings()).runs
    assert running.seconds is not None and running.seconds >= 5 * 60


def test_a_run_without_figures_says_why_in_its_states_words(admin: Admin, engine: Engine) -> None:
    """Only a failed run stopped before its gate; a waiting or running one has not got
    there yet."""
    with transaction(engine) as session:
        ids = {
            status: add_run(session, status, step="train").id
            for status in (RunStatus.REQUESTED, RunStatus.RUNNING, RunStatus.FAILED)
        }
    for status, why in (
        (RunStatus.REQUESTED, "the run has not started"),
        (RunStatus.RUNNING, "not reached yet"),
        (RunStatus.FAILED, "the run stopped before it"),
    ):
        page = admin.client.get(f"/admin/prm/runs/{ids[status]}").text
        for part in ("No gate decision", "No evaluation", "No selection"):
            assert f"{part}: {why}." in page, (status, part)


def test_a_failed_runs_row_says_what_went_wrong_not_that_a_traceback_follows(
    admin: Admin, engine: Engine
) -> None:
    """The worker stores a traceback; the runs table shows its last line, the exception."""
    error = (
        "Traceback (most recent call last):\n"
        '  File "/srv/steplabel/worker/cycle.py", line 270, in run\n'
        "    loaded = _load(current_path)\n"
        "safetensors_rust.SafetensorError: Error while deserializing header: incomplete\n"
    )
    with transaction(engine) as session:
        failed = add_run(session, RunStatus.FAILED, step="compare", error=error).id
    page = admin.client.get("/admin/prm").text
    row = page[page.index(f'id="run-{failed}"') :].split("</tr>")[0]
    note = row.split('class="run-note error"')[1].split("</span>")[0]
    assert ">safetensors_rust.SafetensorError: Error while deserializing header: incomplete" in note
    assert "Traceback" not in note
    detail = admin.client.get(f"/admin/prm/runs/{failed}").text
    assert "Traceback (most recent call last):" in detail  # the whole of it on its page


@pytest.mark.parametrize(
    ("missing", "reason"),
    [
        (
            {
                "processbench": "not computed: STEPLABEL_EVAL_DIR is not set (the folder of "
                "processbench_*.jsonl)"
            },
            "not computed: STEPLABEL_EVAL_DIR is not set",
        ),
        (None, "not computed: the worker found no processbench_*.jsonl (STEPLABEL_EVAL_DIR)"),
    ],
)
def test_processbench_f1_says_why_it_is_missing(
    admin: Admin, engine: Engine, missing: dict[str, str] | None, reason: str
) -> None:
    """A run evaluated without ProcessBench's files showed a bare "—"; it names the setting
    (a run of an older worker, which did not record why, gets the general reason)."""
    metrics = prm_run_metrics()
    del metrics["evaluation"]["processbench"]
    if missing:
        metrics["evaluation_missing"] = missing
    with Session(engine) as session:
        stored_run(session, metrics=metrics, is_current=True)
        session.commit()
    page = admin.client.get("/admin/prm").text
    tile = re.search(r'id="current-processbench-f1">(.*?)</dd>', page, re.S)
    assert tile and reason in tile.group(1)
    assert reason in admin.client.get("/admin").text


def test_a_waiting_run_says_the_worker_is_warming_up(admin: Admin, engine: Engine) -> None:
    """Runs wait for the worker's warm-up: the page says so, and how far it got, while the
    worker's note is fresh; a note from a worker that went silent is not shown."""
    with transaction(engine) as session:
        request_run(session)
        note_warm_up(session, 192, 1087)
    notice = re.search(
        r'<p class="notice">(Run \d+ is waiting.*?)</p>', admin.client.get("/admin/prm").text, re.S
    )
    assert notice and "computing step features ahead of runs" in notice.group(1)
    assert "192 of 1,087 solutions" in notice.group(1)
    with Session(engine) as session:
        noted = warm_up(session)
        assert noted is not None and (noted.done, noted.total) == (192, 1087)
        assert warm_up(session, now=noted.at + WARM_UP_SILENT_AFTER + timedelta(seconds=1)) is None
    with transaction(engine) as session:
        note_warm_up(session, 1087, 1087)
    page = admin.client.get("/admin/prm").text
    assert "is waiting for the worker" in page and "ahead of runs" not in page
