"""What a run measures, as one record: the worker writes it, the PRM pages read it, and the
rows older workers wrote still read (app/run_metrics.py)."""

from typing import Any

from app.run_metrics import Figure, RunMetrics, read_figure
from tests.factories import prm_run_metrics


def old_worker_metrics() -> dict[str, Any]:
    """A run's metrics as worker/cycle.py wrote them before the record had a schema: the
    page's whole figure set, and the keys only the worker's own output read."""
    metrics = prm_run_metrics()
    metrics |= {
        "phase1_examples": 40,
        "evaluation_missing": {"processbench": "no processbench_*.jsonl in STEPLABEL_EVAL_DIR"},
        "pool_scored": 880,
        "pool_scored_with": 7,
        "selection": {
            "strategy": "convincing_wrong",
            "queued": 40,
            "control": 4,
            "yield": 0.5,
            "control_yield": 0.25,
            "pool_wrong_share": 0.33,
            "taken_meanwhile": 1,
            "reason": "generation 3 is 85% labeled",
            "rule": "your pool has 6.0 unlabeled solutions per problem",
        },
        "generation": 4,
    }
    metrics["evaluation"]["best_of_n_imported"] = {"status": "not enough data: no problem"}
    return metrics


def test_an_old_workers_run_reads_and_is_written_back_as_it_was_stored() -> None:
    stored = old_worker_metrics()
    metrics = RunMetrics.read(stored)
    assert metrics.record() == stored
    assert metrics.phase1_examples == 40 and metrics.pool_scored_with == 7
    assert metrics.missing == stored["evaluation_missing"]
    assert metrics.left_out and metrics.left_out[0].reason == "a problem this run's PRM trained on"
    selection = metrics.selection
    assert selection is not None
    assert (selection.wrong_share, selection.control_wrong_share) == (0.5, 0.25)
    assert metrics.mode == "head" and metrics.epoch_losses == [0.912, 0.641, 0.523]
    evaluation = metrics.evaluation
    assert evaluation is not None and evaluation.processbench is not None
    assert set(evaluation.processbench.subsets) == {"gsm8k", "math"}
    sets = evaluation.best_of_n_sets
    assert list(sets) == ["independent samples", "imported samples"]
    assert sets["imported samples"].why_none == "not enough data: no problem"
    assert metrics.best_of_n is evaluation.best_of_n  # the first set with figures


def test_a_run_written_part_by_part_stores_only_what_was_set() -> None:
    metrics = RunMetrics(graded=3)
    metrics.skipped = "9 labels to train on; a run needs 40"
    assert metrics.record() == {"graded": 3, "skipped": "9 labels to train on; a run needs 40"}


def test_runs_before_the_gate_read_as_no_figures() -> None:
    metrics = RunMetrics.read({"step_accuracy": 0.8, "auroc_negative": 0.7})
    assert metrics == RunMetrics() and metrics.best_of_n is None


def test_a_stored_estimate_or_why_there_is_none() -> None:
    assert read_figure({"status": "ok", "value": 0.5, "n": 3}) == Figure(
        value=0.5, n=3, status="ok"
    )
    assert read_figure({"status": "not enough data"}) == Figure(status="not enough data")
    assert read_figure({"status": "ok"}) is None
    assert read_figure({"value": "high", "n": 3}) is None
    assert read_figure(None) is None


def test_read_metrics_takes_what_it_finds() -> None:
    assert RunMetrics.read(None) == RunMetrics.read("text") == RunMetrics()
    metrics = RunMetrics.read(
        {
            "training_args": {"mode": "lora", "layers": [1, 2], "bf16": True},
            "train": {"seconds": 3.5, "epoch_losses": [0.7, "x", 0.5]},
            "evaluation": {"sets": {"held_out_problems": 4, "odd": "x"}, "processbench": 3},
            "pruned_checkpoints": [2, "3", None, 4],
            "selection": {"strategy": "uniform", "queued": 10, "yield": 0.3},
        }
    )
    assert metrics.shown_training_args == {"mode": "lora", "bf16": True}
    assert (metrics.train_figures, metrics.epoch_losses) == ({"seconds": 3.5}, [0.7, 0.5])
    assert metrics.evaluation is not None and metrics.evaluation.sets == {"held_out_problems": 4}
    assert metrics.evaluation.processbench is None and metrics.evaluation.best_of_n_sets == {}
    assert metrics.pruned_checkpoints == [2, 4]
    assert metrics.selection is not None and metrics.selection.wrong_share == 0.3
