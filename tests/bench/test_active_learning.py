"""bench/active_learning.py end to end on a small sample, with the tiny model."""

import json
import math
from pathlib import Path

import pytest

from bench.active_learning import TEST_SHARE, labels_to_reach, main, training_example
from bench.prm_quality import split
from worker.eval_sets import fixed_sample, load_processbench
from worker.select import STRATEGIES

SUBSETS = ["gsm8k", "math"]
PER_SUBSET = 15
SEED_SIZE, BUDGETS = 6, (10, 14)


def test_labels_to_reach_reads_the_curve_in_log_labels() -> None:
    sizes, curve = [50, 100, 200], [0.5, 0.6, 0.7]
    assert labels_to_reach(sizes, curve, 0.6) == pytest.approx(100)
    assert labels_to_reach(sizes, curve, 0.65) == pytest.approx(math.sqrt(100 * 200))
    assert labels_to_reach(sizes, curve, 0.4) == 50  # the seed set already reaches it
    assert labels_to_reach(sizes, curve, 0.8) == 200  # beyond the largest budget
    assert labels_to_reach(sizes, [0.5, 0.7, 0.6], 0.6) == pytest.approx(math.sqrt(50 * 100))


def test_revealed_labels_become_the_items_labels(shared_data: Path) -> None:
    items = load_processbench(shared_data, ["gsm8k"])
    wrong = next(i for i in items if 0 < i.label < len(i.steps) - 1)
    right = next(i for i in items if i.label < 0)
    assert training_example(wrong).labels == [1] * wrong.label + [-1]
    assert training_example(wrong).steps == wrong.steps[: wrong.label + 1]
    assert training_example(right).labels == right.labels


def test_every_strategy_labels_each_budget_and_never_a_test_problem(
    shared_data: Path, tmp_path: Path
) -> None:
    figures, plot = tmp_path / "figures.json", tmp_path / "plot.svg"
    main(
        [
            "--model=tiny",
            f"--subsets={','.join(SUBSETS)}",
            f"--per-subset={PER_SUBSET}",
            f"--seed-size={SEED_SIZE}",
            f"--budgets={','.join(map(str, BUDGETS))}",
            "--batch=3",
            "--seeds=2",
            f"--cache-dir={tmp_path / 'cache'}",
            f"--plot={plot}",
            f"--json={figures}",
        ]
    )
    result = json.loads(figures.read_text())
    parts = split(
        fixed_sample(load_processbench(shared_data, SUBSETS), PER_SUBSET, 0), TEST_SHARE, 0
    )
    test_ids = {i.id for i in parts.test}
    test_problems = {i.problem for i in parts.test}
    problem_of = {i.id: i.problem for i in parts.train}

    assert {(r["strategy"], r["seed"]) for r in result["runs"]} == {
        (s, seed) for s in STRATEGIES for seed in (0, 1)
    }
    for run in result["runs"]:
        assert [s["labels"] for s in run["snapshots"]] == [SEED_SIZE, *BUDGETS]
        assert len(run["labeled"]) == len(set(run["labeled"])) == BUDGETS[-1]
        assert not set(run["labeled"]) & test_ids
        assert not {problem_of[i] for i in run["labeled"]} & test_problems

    rows = result["rows"]
    assert [(r["strategy"], r["labels"]) for r in rows[:3]] == [
        ("seed set (all)", SEED_SIZE),
        ("uniform", BUDGETS[0]),
        ("uniform", BUDGETS[1]),
    ]
    for row in rows[1:3]:
        assert all(row["ratio"][f]["value"] == 1.0 for f in ("f1", "auroc"))
    estimates = [r[f] for r in rows for f in ("f1", "auroc")]
    estimates += [ratio for r in rows for ratio in r["ratio"].values()]
    shown = [e for e in estimates if e["status"] == "ok"]
    assert len(shown) > len(estimates) / 2
    assert all(e["low"] <= e["value"] <= e["high"] for e in shown)
    assert all(0 <= r["negatives_per_label"] <= 1 for r in rows)
    assert plot.read_text().startswith("<svg")


def test_full_mode_trains_without_the_feature_cache_and_records_the_device(
    shared_data: Path, tmp_path: Path
) -> None:
    figures = tmp_path / "figures.json"
    main(
        [
            "--model=tiny",
            "--mode=full",
            "--device=cpu",
            "--subsets=gsm8k",
            "--per-subset=12",
            "--seed-size=3",
            "--budgets=5",
            "--batch=2",
            "--seeds=1",
            "--strategies=uniform,convincing_wrong",
            f"--cache-dir={tmp_path / 'cache'}",
            f"--plot={tmp_path / 'plot.svg'}",
            f"--json={figures}",
        ]
    )
    result = json.loads(figures.read_text())
    assert result["setup"]["mode"] == "full"
    assert result["setup"]["device"] == "full on cpu"
    assert result["setup"]["feature_sequences_computed"] == 0  # nothing cached: it trains
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
