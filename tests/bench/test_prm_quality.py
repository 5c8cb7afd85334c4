"""bench/prm_quality.py: what it trains on never reaches what it is judged on."""

import json
from pathlib import Path

from bench.prm_quality import main, restrict, split
from worker.eval_sets import load_processbench


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
