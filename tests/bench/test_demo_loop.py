"""bench/demo_loop.py with the tiny model: the demo's first 70 labels give a run with figures."""

import json
from pathlib import Path

import pytest

from app.datasets.demo_seed import QUALITY_CONTROL_QUESTIONS
from bench.demo_loop import LABELERS, main


def test_seventy_demo_labels_give_a_run_with_a_held_out_figure(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the run records, not how well the tiny model learns: two passes over the labels
    # and small evaluation sets (the worker's defaults take a minute on the tiny model).
    smaller = {"TRAIN_EPOCHS": 2, "EVAL_PROCESSBENCH_PER_SUBSET": 6, "EVAL_BEST_OF_N_PROBLEMS": 5}
    for name, value in smaller.items():
        monkeypatch.setenv(f"STEPLABEL_{name}", str(value))
    figures = tmp_path / "figures.json"
    # 70: the held-out problems' labels from solutions no PRM chose reach 5 negative steps
    # there (60 hold 4, "not enough data", as README says).
    assert main(["--model=tiny", "--labels=70", f"--json={figures}"]) == 0
    result = json.loads(figures.read_text())
    assert result["status"] == "succeeded"
    # The queue serves quality-control questions at random (qc_rate), and their answers are
    # not trained on: each demo labeler meets each demo question at most once. Of the others,
    # those on held-out problems (a fifth of the problems) are not trained on either.
    judged = 70 - len(LABELERS) * QUALITY_CONTROL_QUESTIONS
    assert 40 <= result["labels_used"] < judged
    assert result["sets"]["held_out_problems"] >= 5
    # "0.812 [0.700, 0.915]": a figure with its interval, not "not enough data".
    value, interval = result["step_auroc"].split(" ", 1)
    low, high = (float(x) for x in interval.strip("[]").split(", "))
    assert low <= float(value) <= high
    assert set(result["best_of_n"]) == {"prm", "majority", "random"}
    assert result["sets"]["best_of_n_problems"] == 5
