"""bench/active_learning.py end to end on a small sample, with the tiny model."""

import json
import math
import pickle
from pathlib import Path
from typing import Any

import pytest

from bench.active_learning import main, parse
from bench.active_learning_data import TEST_SHARE, training_example
from bench.active_learning_ratio import labels_to_reach
from bench.active_learning_report import primary_figure, rule_pick
from bench.prm_quality_data import split
from worker.eval_sets import fixed_sample, load_processbench
from worker.select import STRATEGIES

SUBSETS = ["gsm8k", "math"]
PER_SUBSET = 15
SEED_SIZE, BUDGETS = 6, (10, 14)


@pytest.fixture(scope="module")
def tiny_features(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One feature cache for the module's head-mode runs on the same sample (SUBSETS,
    PER_SUBSET): the first run computes the tiny model's features, the others read them."""
    return tmp_path_factory.mktemp("features")


def test_labels_to_reach_reads_the_curve_in_log_labels() -> None:
    sizes, curve = [50, 100, 200], [0.5, 0.6, 0.7]
    assert labels_to_reach(sizes, curve, 0.6) == pytest.approx(100)
    assert labels_to_reach(sizes, curve, 0.65) == pytest.approx(math.sqrt(100 * 200))
    assert labels_to_reach(sizes, curve, 0.4) == 50  # the seed set already reaches it
    assert labels_to_reach(sizes, curve, 0.8) == 200  # beyond the largest budget
    assert labels_to_reach(sizes, [0.5, 0.7, 0.6], 0.6) == pytest.approx(math.sqrt(50 * 100))


def ratio_row(strategy: str, labels: int, f1: float | None, auroc: float) -> dict[str, Any]:
    """A summary row as bench/active_learning.py writes it, with the ratios given."""

    def ratio(value: float | None) -> dict[str, Any]:
        if value is None:
            return {"status": "not enough data"}
        return {"status": "ok", "value": value, "low": value, "high": value, "reach": ""}

    return {
        "strategy": strategy,
        "labels": labels,
        "ratio": {"f1": ratio(f1), "auroc": ratio(auroc)},
    }


def test_the_primary_figure_is_the_geometric_mean_of_four_ratios() -> None:
    rows = [
        {"strategy": "seed set (all)", "labels": 50, "ratio": {}},
        ratio_row("uniform", 200, 1.0, 1.0),
        ratio_row("uniform", 400, 1.0, 1.0),
        # 100 labels are not read: only 200 and 400 are the primary budgets.
        ratio_row("ensemble", 100, 9.0, 9.0),
        ratio_row("ensemble", 200, 2.0, 1.0),
        ratio_row("ensemble", 400, 0.5, 4.0),
        ratio_row("random_wrong", 200, 1.5, 1.5),
        ratio_row("random_wrong", 400, 1.5, 1.5),
        ratio_row("uncertain", 200, None, 3.0),
        ratio_row("uncertain", 400, 3.0, 3.0),
    ]
    primary = primary_figure(rows)
    assert [f["strategy"] for f in primary] == ["random_wrong", "ensemble", "uncertain"]
    means = {f["strategy"]: f["geometric_mean"] for f in primary}
    assert means["ensemble"] == pytest.approx((2.0 * 1.0 * 0.5 * 4.0) ** 0.25)
    assert means["random_wrong"] == pytest.approx(1.5)
    assert means["uncertain"] is None  # a ratio missing: no mean, whatever the others
    assert rule_pick(primary) == "random_wrong"


def test_the_rule_picks_uniform_when_no_strategy_is_above_one() -> None:
    rows = [ratio_row("ensemble", b, 0.9, 1.0) for b in (200, 400)]
    rows += [ratio_row("convincing_wrong", b, 0.5, 0.8) for b in (200, 400)]
    assert rule_pick(primary_figure(rows)) == "uniform"


def test_revealed_labels_become_the_items_labels(shared_data: Path) -> None:
    items = load_processbench(shared_data, ["gsm8k"])
    wrong = next(i for i in items if 0 < i.label < len(i.steps) - 1)
    right = next(i for i in items if i.label < 0)
    assert training_example(wrong).labels == [1] * wrong.label + [-1]
    assert training_example(wrong).steps == wrong.steps[: wrong.label + 1]
    assert training_example(right).labels == right.labels


def test_every_strategy_labels_each_budget_and_never_a_test_problem(
    shared_data: Path, tmp_path: Path, tiny_features: Path
) -> None:
    figures, plot = tmp_path / "figures.json", tmp_path / "plot.svg"
    main(
        [
            "--model=tiny",
            "--epochs=2",
            f"--subsets={','.join(SUBSETS)}",
            f"--per-subset={PER_SUBSET}",
            f"--seed-size={SEED_SIZE}",
            f"--budgets={','.join(map(str, BUDGETS))}",
            "--batch=3",
            "--seeds=2",
            f"--cache-dir={tiny_features}",
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


def test_seeds_side_by_side_give_the_figures_of_one_process(
    shared_data: Path, tmp_path: Path, tiny_features: Path
) -> None:
    def figures(workers: int) -> dict[str, Any]:
        written = tmp_path / f"workers-{workers}.json"
        main(
            [
                "--model=tiny",
                "--epochs=2",
                f"--subsets={','.join(SUBSETS)}",
                f"--per-subset={PER_SUBSET}",
                f"--seed-size={SEED_SIZE}",
                f"--budgets={BUDGETS[0]}",
                "--batch=2",
                "--seeds=3",
                f"--workers={workers}",
                "--strategies=uniform,ensemble,random_wrong",
                f"--cache-dir={tiny_features}",
                f"--plot={tmp_path / 'plot.svg'}",
                f"--json={written}",
            ]
        )
        return dict(json.loads(written.read_text()))

    # One process computes the features (or a test before it did); the workers read them
    # back from the cache.
    alone, side_by_side = figures(1), figures(2)
    assert (alone["setup"]["workers"], side_by_side["setup"]["workers"]) == (1, 2)
    assert side_by_side["setup"]["feature_sequences_computed"] == 0

    def outcome(result: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(r["seed"], r["strategy"], r["labeled"], r["snapshots"]) for r in result["runs"]]

    assert [r["seed"] for r in side_by_side["runs"]] == [0, 1, 2] * 3
    assert outcome(side_by_side) == outcome(alone)
    assert side_by_side["rows"] == alone["rows"]


def test_workers_must_be_at_least_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["--model=tiny", "--workers=0"])
    assert "--workers must be at least 1" in capsys.readouterr().err
    assert parse(["--model=tiny", "--mode=full"]).workers == 1  # a GPU's whole model: one process


def test_full_mode_trains_without_the_feature_cache_and_records_the_device(
    shared_data: Path, tmp_path: Path
) -> None:
    figures = tmp_path / "figures.json"
    main(
        [
            "--model=tiny",
            "--epochs=2",
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


def test_a_stopped_run_goes_on_from_the_seeds_it_finished(
    shared_data: Path, tmp_path: Path, tiny_features: Path
) -> None:
    folder = tmp_path / "seeds"

    def run(budgets: str = str(BUDGETS[0])) -> dict[str, Any]:
        written = tmp_path / "figures.json"
        main(
            [
                "--model=tiny",
                "--epochs=2",
                f"--subsets={','.join(SUBSETS)}",
                f"--per-subset={PER_SUBSET}",
                f"--seed-size={SEED_SIZE}",
                f"--budgets={budgets}",
                "--batch=2",
                "--seeds=2",
                "--workers=1",
                "--strategies=uniform,random_wrong",
                f"--cache-dir={tiny_features}",
                f"--plot={tmp_path / 'plot.svg'}",
                f"--json={written}",
                f"--resume={folder}",
            ]
        )
        return dict(json.loads(written.read_text()))

    whole = run()
    assert sorted(p.name for p in folder.iterdir()) == [
        "options.json",
        "seed-0.pickle",
        "seed-1.pickle",
    ]
    # As if stopped during seed 1: seed 0 is taken back, marked to tell it from a rerun.
    (folder / "seed-1.pickle").unlink()
    with (folder / "seed-0.pickle").open("rb") as source:
        seconds, runs = pickle.load(source)
    runs[0].seconds = 1000.0
    with (folder / "seed-0.pickle").open("wb") as out:
        pickle.dump((seconds, runs), out)

    resumed = run()

    assert resumed["compute"]["uniform"]["seconds"] > 1000  # seed 0's, from the folder
    assert resumed["rows"] == whole["rows"]  # seed 1 run again, the same
    assert (folder / "seed-1.pickle").exists()
    with pytest.raises(SystemExit, match="budgets"):
        run(budgets=str(BUDGETS[1]))
