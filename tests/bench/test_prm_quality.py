"""bench/prm_quality.py: what it trains on never reaches what it is judged on."""

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from app.content_keys import normalized_problem
from bench.prm_quality import (
    HEADS,
    figures,
    main,
    restrict,
    split,
    train_constant,
    with_prmbench,
)
from worker.eval_sets import ProcessBenchItem, fixed_sample, load_processbench
from worker.model import training_args_for


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
    result = figures(trained, data, 0, judge="calibration")

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
