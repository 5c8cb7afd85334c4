"""bench/prm_quality.py: what it trains on never reaches what it is judged on."""

import argparse
import io
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from app.content_keys import normalized_problem
from bench.prm_quality import main
from bench.prm_quality_data import (
    PHASE1_TEST,
    Split,
    phase1_judged,
    phase1_training,
    restrict,
    split,
    with_prmbench,
)
from bench.prm_quality_report import figures, judge_model, pooled_estimate, print_table
from bench.prm_quality_training import (
    FULL,
    HEADS,
    LORA,
    Trained,
    cpu_deadline,
    smollm2_args,
    train_constant,
)
from worker import evaluate
from worker.eval_sets import ProcessBenchItem, fixed_sample, load_processbench
from worker.training_args import MODE_TRAINING, training_args_for


def test_training_on_more_subsets_leaves_the_judged_problems_alone(shared_data: Path) -> None:
    narrow = split(load_processbench(shared_data, ["gsm8k"]), 0.5, 0)
    wide = restrict(
        split(load_processbench(shared_data, ["gsm8k", "math"]), 0.5, 0),
        ["gsm8k"],
        ["gsm8k", "math"],
    )
    assert [i.id for i in wide.test] == [i.id for i in narrow.test]
    assert [i.id for i in wide.calibration] == [i.id for i in narrow.calibration]
    assert {i.subset for i in wide.train} == {"gsm8k", "math"}
    assert {i.id for i in wide.train if i.subset == "gsm8k"} == {i.id for i in narrow.train}
    test_problems = {i.problem for i in wide.test}
    assert not test_problems & {i.problem for i in wide.train}


def test_the_figures_name_the_judged_subsets_only(shared_data: Path, tmp_path: Path) -> None:
    figures = tmp_path / "figures.json"
    main(
        [
            "--models=constant",
            "--subsets=gsm8k",
            "--train-subsets=gsm8k,math",
            "--per-subset=20",
            "--phase1-test-problems=0",
            f"--json={figures}",
        ]
    )
    (result,) = json.loads(figures.read_text())
    assert list(result["processbench"]["subsets"]) == ["gsm8k"]
    assert set(result["step_auroc"]) == {"all", "gsm8k"}


def test_judging_on_calibration_never_reads_a_test_problem(shared_data: Path) -> None:
    data = split(fixed_sample(load_processbench(shared_data, ["gsm8k"]), 40, 0), 0.5, 0)
    trained = train_constant(data, argparse.Namespace())
    asked: list[str] = []
    scores = trained.probabilities

    def recorded(items: Sequence[ProcessBenchItem]) -> list[np.ndarray]:
        asked.extend(i.id for i in items)
        return scores(items)

    trained.probabilities = recorded
    judged = judge_model(trained, data, 0, judge="calibration")
    result = figures("constant", [judged], 0, judge="calibration")

    assert result["judged_on"] == "calibration"

    assert set(asked) == {i.id for i in data.calibration}
    judged = result["processbench"]["subsets"]["gsm8k"]
    assert judged["erroneous"] + judged["correct"] == len(data.calibration)


def test_prmbench_training_leaves_out_every_judged_problem(
    shared_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = argparse.Namespace(
        data=shared_data, test_share=0.5, seed=0, prmbench_trajectories=None
    )
    data = split(load_processbench(shared_data, ["math"]), 0.5, 0)

    wider = with_prmbench(data, options)

    added = wider.train[len(data.train) :]
    everything = split(load_processbench(shared_data), 0.5, 0)
    judged = {normalized_problem(i.problem) for i in everything.calibration + everything.test}
    assert added and {i.subset for i in added} == {"prmbench"}
    assert not {normalized_problem(i.problem) for i in added} & judged
    assert wider.calibration == data.calibration and wider.test == data.test
    dropped = int(capsys.readouterr().out.split("; ")[1].split()[0])
    assert 0 < dropped < 357


def test_a_head_preset_names_every_head_field() -> None:
    """A preset is the head it was measured as, whatever the worker's default becomes."""
    fields = {"head_readings", "head_hidden", "head_members", "head_class_balance"}
    for name, preset in HEADS.items():
        assert fields <= set(preset), name
        args = training_args_for("tiny", mode="head", **preset)
        assert {f: getattr(args, f) for f in fields} == {
            f: tuple(v) if f == "head_readings" else v for f, v in preset.items() if f in fields
        }
    assert HEADS["all-x5"]["head_hidden"] == 0


def test_each_training_seed_trains_a_model_and_the_figures_pool_them(
    shared_data: Path, tmp_path: Path
) -> None:
    saved = tmp_path / "figures.json"
    main(
        [
            "--models=constant,tiny",
            "--train-seeds=0,1",
            "--subsets=gsm8k,math",
            "--per-subset=30",
            "--tiny-epochs=2",
            # Not PRM800K phase 1's test steps (3,181 solutions, two seeds: almost all of
            # the test's time); a test below judges them.
            "--phase1-test-problems=0",
            f"--json={saved}",
        ]
    )
    constant, tiny = json.loads(saved.read_text())

    assert constant["train_seeds"] == [0]  # nothing in it depends on a seed
    assert tiny["train_seeds"] == [0, 1]
    assert [run["train_seed"] for run in tiny["per_seed"]] == [0, 1]
    first, second = (run["step_auroc"]["all"]["value"] for run in tiny["per_seed"])
    assert first != second  # each seed's own weights
    for pooled, per_seed in (
        (tiny["processbench"]["f1"], [run["processbench"]["f1"] for run in tiny["per_seed"]]),
        (tiny["step_auroc"]["all"], [run["step_auroc"]["all"] for run in tiny["per_seed"]]),
    ):
        assert pooled["value"] == pytest.approx(np.mean([e["value"] for e in per_seed]))
        assert pooled["low"] <= pooled["value"] <= pooled["high"]
    assert tiny["thresholds"] == [run["threshold"] for run in tiny["per_seed"]]
    assert set(tiny["processbench"]["subsets"]) == {"gsm8k", "math"}


def _synthetic_split() -> Split:
    """Solutions of four steps, one in five correct, the rest wrong at steps 0 to 3."""

    def item(subset: str, k: int) -> ProcessBenchItem:
        steps = [f"step {s}" for s in range(4)]
        return ProcessBenchItem(subset, f"{subset}-{k}", f"{subset} {k}?", steps, k % 5 - 1, True)

    calibration = [item(subset, k) for subset in ("a", "b") for k in range(40)]
    test = [item(subset, k) for subset in ("a", "b") for k in range(40, 120)]
    return Split([], calibration, test)


def _scorer(skill: float, seed: int) -> Trained:
    """A model whose P(-1) tells a step's label apart from noise by ``skill``."""

    def probabilities(items: Sequence[ProcessBenchItem]) -> list[np.ndarray]:
        scored = []
        for item in items:
            rng = np.random.default_rng([seed, int(item.id.split("-")[1])])
            sign = np.array([1.0 if label == -1 else -1.0 for label in item.labels])
            wrong = 1 / (1 + np.exp(-(skill * sign + rng.normal(size=len(sign)))))
            scored.append(np.stack([wrong, np.zeros_like(wrong), 1 - wrong], axis=1))
        return scored

    return Trained(f"skill {skill}", probabilities, 0.0)


def test_an_interval_over_seeds_that_disagree_is_wider_than_over_test_draws_alone() -> None:
    data = _synthetic_split()
    runs = [judge_model(_scorer(skill, seed), data, seed) for seed, skill in enumerate((4.0, 0.5))]
    result = figures("synthetic", runs, 0)

    f1_statistics = [evaluate.mean_f1_statistic(r.subsets, r.threshold)[0] for r in runs]
    strata = evaluate.mean_f1_statistic(runs[0].subsets, runs[0].threshold)[1].tolist()
    auroc_statistics = [r.steps["all"].auroc_statistic() for r in runs]
    problems = len(runs[0].steps["all"].ratings)
    for pooled, statistics, units, unit_strata in (
        (result["processbench"]["f1"], f1_statistics, len(strata), strata),
        (result["step_auroc"]["all"], auroc_statistics, problems, None),
    ):
        draws_only = evaluate.bootstrap(
            lambda u, s=statistics: float(np.mean([f(u) for f in s])), units, strata=unit_strata
        )
        assert draws_only is not None
        seeds = [f(np.arange(units)) for f in statistics]
        assert seeds[0] > seeds[1] + 0.1  # the seeds disagree
        assert pooled["value"] == pytest.approx(draws_only.value)
        assert pooled["low"] <= pooled["value"] <= pooled["high"]
        assert pooled["high"] - pooled["low"] > draws_only.high - draws_only.low
        # Each seed's own figure lies inside the pooled interval.
        assert pooled["low"] <= min(seeds) and max(seeds) <= pooled["high"]


def test_over_one_seed_the_pooled_interval_is_the_test_draws_bootstrap() -> None:
    values = np.random.default_rng(0).normal(size=50)
    strata = [k % 2 for k in range(50)]

    def mean(units: np.ndarray) -> float:
        return float(values[units].mean())

    assert pooled_estimate([mean], 50, strata, seed=3) == evaluate.bootstrap(
        mean, 50, strata=strata, seed=3
    )


def test_fine_tuning_takes_the_modes_defaults_and_the_gpu_its_length() -> None:
    full = smollm2_args(FULL, "models/smollm2-135m", "cuda", 2)
    assert (full.mode, full.device, full.max_length, full.seed) == ("full", "cuda", 2048, 2)
    assert full.bf16 is None  # the worker's CUDA default: bf16 autocast where supported
    assert full.learning_rate == training_args_for("x", mode="full").learning_rate
    lora = smollm2_args(LORA, "models/smollm2-135m", "cuda", 1)
    assert (lora.mode, lora.max_length, lora.seed) == ("lora", 2048, 1)
    for field, value in MODE_TRAINING["lora"].items():
        assert getattr(lora, field) == value
    assert smollm2_args(LORA, "models/smollm2-135m", "cpu", 0).max_length == 1024
    assert cpu_deadline(smollm2_args(FULL, "m", "cpu", 0), 20.0) == 1200.0
    assert cpu_deadline(smollm2_args(LORA, "m", "cpu", 0), 20.0) == 1200.0
    assert cpu_deadline(full, 20.0) is None and cpu_deadline(lora, 20.0) is None


def test_a_head_on_the_gpu_reads_float32_features_as_the_cpu_default_does() -> None:
    gpu = smollm2_args("smollm2-135m", "models/smollm2-135m", "cuda", 0)
    cpu = smollm2_args("smollm2-135m", "models/smollm2-135m", "cpu", 0)
    assert (gpu.mode, gpu.device, gpu.bf16) == ("head", "cuda", False)
    assert (cpu.mode, cpu.device, cpu.bf16) == ("head", "cpu", None)
    assert cpu_deadline(gpu, 20.0) is None and cpu_deadline(cpu, 20.0) is None
    preset = smollm2_args("smollm2-135m:all-x5", "models/smollm2-135m", "cuda", 0)
    assert (preset.head_members, preset.bf16) == (5, False)


def test_a_subset_without_correct_test_solutions_prints_no_accuracy_for_them() -> None:
    data = _synthetic_split()
    wrong_only = [i for i in data.test if i.subset == "b" or i.label >= 0]
    result = figures(
        "x", [judge_model(_scorer(1.0, 0), Split([], data.calibration, wrong_only), 0)], 0
    )
    out = io.StringIO()

    print_table([result], out)

    (row,) = [line for line in out.getvalue().splitlines() if line.startswith("| x | a |")]
    assert row.split(" | ")[4] == "n/a"  # accuracy on correct solutions
    assert result["processbench"]["subsets"]["a"]["accuracy_correct"] is None


def test_phase1_steps_train_and_judge_without_a_processbench_problem(
    shared_data: Path, tmp_path: Path
) -> None:
    options = argparse.Namespace(
        data=shared_data,
        test_share=0.5,
        seed=0,
        judge="test",
        phase1_problems=30,
        phase1_test_problems=None,
    )
    processbench = {normalized_problem(i.problem) for i in load_processbench(shared_data)}

    training = phase1_training(options)
    judged = phase1_judged(options)

    assert len({e.problem for e in training}) == 30
    assert all(e.labels[-1] in (-1, 0, 1) for e in training + judged)
    judged_problems = {normalized_problem(e.problem) for e in judged}
    # 101 test problems, 28 of them ProcessBench's, some without a rated step.
    assert 60 < len(judged_problems) <= 101 - 28
    assert not judged_problems & processbench
    assert not {normalized_problem(e.problem) for e in training} & (processbench | judged_problems)
    options.judge = "calibration"
    assert phase1_judged(options) == []

    figures_path = tmp_path / "figures.json"
    main(
        [
            "--models=constant",
            "--subsets=gsm8k",
            "--per-subset=20",
            "--phase1-test-problems=8",
            f"--json={figures_path}",
        ]
    )
    (result,) = json.loads(figures_path.read_text())
    # A constant model tells no step from another: a defined AUROC of one half.
    assert result["step_auroc"][PHASE1_TEST]["value"] == pytest.approx(0.5)
    assert result["step_auroc"][PHASE1_TEST]["n"] == 8  # problems, the bootstrap's units
