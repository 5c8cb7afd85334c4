"""bench/bon32.py and bench/active_learning.py's bon32 shape: the simulated labeler's rule,
the regrading and the ProcessBench test problems left out, K per problem and the paper's
fixed selector, on a small part of the real file with the tiny model."""

import gzip
import json
import random
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from app.core.config import get_settings
from app.pool_shape import strategy_for_pool
from bench.active_learning import main, parse
from bench.active_learning_data import Data, training_example
from bench.active_learning_learner import Learner, Progress
from bench.active_learning_rounds import arms, grow, seed_set, start
from bench.bon32 import (
    FILE,
    MATH500,
    Bon32Solution,
    bon32_split,
    load_bon32,
    processbench_test_problems,
    rule_agreement,
    simulated_first_error,
)
from bench.prm_quality_data import Split, split
from worker.eval_sets import ProcessBenchItem, load_processbench
from worker.split import split_key


@pytest.mark.parametrize(
    ("scores", "correct", "first_error"),
    [
        ([0.9, 0.8, 0.3, 0.9], True, 2),  # the first step below 0.5, whatever the answer
        ([0.9, 0.2, 0.1], False, 1),  # the first of several
        ([0.4], True, 0),
        ([0.9, 0.5, 0.99], True, -1),  # 0.5 is not below 0.5
        ([0.9, 0.5, 0.99], False, 2),  # a wrong answer with no such step: its last step
        ([0.51], False, 0),
    ],
)
def test_the_simulated_labeler_reads_the_first_step_below_one_half(
    scores: list[float], correct: bool, first_error: int
) -> None:
    assert simulated_first_error(scores, correct) == first_error


def test_a_solution_without_steps_has_no_simulated_labels() -> None:
    with pytest.raises(ValueError, match="without steps"):
        simulated_first_error([], True)


def solution(scores: list[float], correct: bool, problem: str = "p", sample: int = 0) -> Any:
    item = ProcessBenchItem(
        "gsm8k",
        f"{problem}:{sample}",
        problem,
        [f"step {k}" for k in range(len(scores))],
        simulated_first_error(scores, correct),
        correct,
    )
    return Bon32Solution(item, problem, sample, scores, correct)


def test_the_rules_agreement_with_the_graded_answers() -> None:
    solutions = [
        solution([0.9, 0.9], True),  # agrees
        solution([0.9, 0.3], True),  # a right answer with a flagged step
        solution([0.2, 0.9], False),  # agrees
        solution([0.9, 0.9], False),  # the fallback
    ]
    agreement = rule_agreement(solutions)
    assert agreement["agreement"] == 0.5
    assert agreement["right_answers_without_flagged_step"] == 0.5
    assert agreement["wrong_answers_with_flagged_step"] == 0.5
    assert agreement["wrong_answers_fallback_last_step"] == 1
    assert agreement["with_error"] == 3


def write_bon32(data: Path, records: list[dict[str, Any]]) -> None:
    with gzip.open(data / FILE, "wt") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")


def record(dataset: str, problem_id: str, problem: str, **fields: Any) -> dict[str, Any]:
    return {
        "dataset": dataset,
        "problem_id": problem_id,
        "sample": 0,
        "problem": problem,
        "ground_truth": "1",
        "steps": ["First.", "So the answer is $\\boxed{1}$."],
        "answer": "1",
        "is_correct": True,
        "qwen_prm": [0.9, 0.9],
        **fields,
    }


def test_math500_is_regraded_against_its_true_answers_and_processbench_test_problems_drop(
    shared_data: Path, tmp_path: Path
) -> None:
    for name in (*(f.name for f in shared_data.glob("processbench_*.jsonl")), MATH500):
        (tmp_path / name).symlink_to(shared_data / name)
    truth = json.loads((shared_data / MATH500).read_text().splitlines()[0])["answer"]
    tested = next(iter(split(load_processbench(shared_data), 0.5, 0).test))
    records = [
        # The file's ground truth is a fragment: its "wrong" full answer is right.
        record(
            "math500",
            "math500_000",
            "a MATH-500 problem",
            ground_truth="2",
            is_correct=False,
            steps=["Convert.", f"The answer is $\\boxed{{{truth}}}$."],
        ),
        record("gsm8k", "gsm8k_000", "a GSM8K problem", qwen_prm=[0.9, 0.1]),
        record("gsm8k", "gsm8k_001", f"  {tested.problem}  "),  # a ProcessBench test problem
        record("gsm8k", "gsm8k_002", "no scores", qwen_prm=None),
    ]
    write_bon32(tmp_path, records)
    corpus = load_bon32(tmp_path)
    by_id = {s.problem_id: s for s in corpus.solutions}
    assert sorted(by_id) == ["gsm8k_000", "math500_000"]
    assert by_id["math500_000"].item.final_answer_correct is True
    assert by_id["math500_000"].file_correct is False
    assert by_id["gsm8k_000"].item.label == 1
    assert corpus.notes["problems_dropped_as_processbench_test_problems"] == 1
    assert corpus.notes["solutions_without_step_scores"] == 1
    assert corpus.notes["regraded_changed"] == 1
    assert processbench_test_problems(shared_data)  # the split every table judges on


def many_samples(problems: int, samples: int) -> list[Bon32Solution]:
    rng = random.Random(0)
    return [
        solution([rng.random() for _ in range(3)], rng.random() < 0.6, f"gsm8k_{p:03d}", s)
        for p in range(problems)
        for s in range(samples)
    ]


def test_a_half_keeps_its_problems_at_every_samples_per_problem() -> None:
    corpus = type("Corpus", (), {"solutions": many_samples(80, 32)})()
    one = bon32_split(corpus, "calibration", 1, 10, 4)  # type: ignore[arg-type]
    many = bon32_split(corpus, "calibration", 32, 10, 4)  # type: ignore[arg-type]
    problems = {s.problem_id for s in one.pool}
    assert len(problems) == 10 and problems == {s.problem_id for s in many.pool}
    assert len(one.pool) == 10 and len(many.pool) == 320
    judged = {s.problem_id for s in many.held_out}
    assert len(judged) == 4 and not judged & problems
    assert Counter(s.problem_id for s in many.held_out) == dict.fromkeys(judged, 8)
    assert [s.item.id for s in one.held_out] == [s.item.id for s in many.held_out]  # one judge
    other = bon32_split(corpus, "confirmation", 32, 10, 4)  # type: ignore[arg-type]
    assert not {s.problem_id for s in other.pool} & (problems | judged)


@pytest.fixture(scope="module")
def small_pool(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Six GSM8K problems of the real file at 8 samples each (the file's grades: GSM8K's
    are sound), ten ProcessBench calibration solutions to judge on, the tiny model: loaded
    and warmed once for the module, as the tests below only read it (or patch it)."""
    features = tmp_path_factory.mktemp("features")
    with gzip.open(shared_data / FILE, "rt") as lines:
        records = [json.loads(next(lines)) for _ in range(6 * 32)]
    pool = [
        ProcessBenchItem(
            r["dataset"],
            f"{r['problem_id']}:{r['sample']}",
            r["problem"],
            r["steps"],
            simulated_first_error(r["qwen_prm"], r["is_correct"]),
            r["is_correct"],
        )
        for r in records
        if r["sample"] < 8
    ]
    calibration = split(load_processbench(shared_data, ["gsm8k"]), 0.5, 0).calibration[:10]
    data = Data(
        Split(pool, calibration, []),
        [training_example(i) for i in pool],
        [split_key(i.id.split(":")[0]) for i in pool],
        {"corpus": "bon32"},
    )
    options = parse(
        [
            "--corpus",
            "bon32",
            "--model",
            "tiny",
            "--judge",
            "calibration",
            "--seed-size",
            "3",
            "--budgets",
            "9,15",
            "--per-problem",
            "2",
            "--strategies",
            "uniform,uncertain,convincing_wrong",
            "--cache-dir",
            str(features),
        ]
    )
    learner = Learner.load(options)
    learner.warm(data, Progress(), options.judge)
    return data, options, learner


def test_the_seed_set_is_one_solution_of_each_of_its_problems(small_pool: Any) -> None:
    data, options, _ = small_pool
    chosen = seed_set(data, 0, options.schedule.seed_size, one_per_problem=True)
    assert len(chosen) == 3 and len({data.problems[i] for i in chosen}) == 3
    assert chosen != seed_set(data, 1, 3, one_per_problem=True)


def test_the_fixed_selector_never_retrains_and_every_round_takes_k_per_problem(
    small_pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, options, learner = small_pool
    assert arms(options) == [
        ("uniform", "retrain"),
        ("uncertain", "retrain"),
        ("uncertain", "fixed"),
        ("convincing_wrong", "retrain"),
        ("convincing_wrong", "fixed"),
    ]
    begun = start(learner, data, 0, options)
    scorings: list[int] = []
    real = learner.candidates

    def counted(data: Data, unlabeled: list[int]) -> Any:
        scorings.append(len(unlabeled))
        return real(data, unlabeled)

    monkeypatch.setattr(learner, "candidates", counted)
    for selector in ("fixed", "retrain"):
        scorings.clear()
        run = grow(learner, data, "uncertain", begun, options, Progress(), selector)
        assert len(run.labeled) == 15 and len(set(run.labeled)) == 15
        # The fixed selector scored the pool once, with the seed set's PRM; never again.
        assert len(scorings) == (0 if selector == "fixed" else 1), selector
        assert run.rescorings == len(scorings)
        sizes = options.schedule.sizes
        for low, high in pairwise(sizes):
            taken = Counter(data.problems[i] for i in run.labeled[low:high])
            assert max(taken.values()) == 2, (selector, taken)  # K = 2, and no more
            assert len(taken) == 3  # six labels a round: three problems


def test_the_bon32_default_writes_the_default_strategy_and_marks_the_primary_rows(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for name in (*(f.name for f in shared_data.glob("processbench_*.jsonl")), MATH500):
        (data / name).symlink_to(shared_data / name)
    rng = random.Random(1)
    records = []
    for p in range(60):
        for sample in range(32):
            answer = rng.choice("12")
            records.append(
                record(
                    "gsm8k",
                    f"gsm8k_{p:03d}",
                    f"Synthetic problem {p}: what is {p} - {p} + 1?",
                    sample=sample,
                    steps=[f"Step {k} of {sample}." for k in range(2)]
                    + [f"So $\\boxed{{{answer}}}$."],
                    qwen_prm=[rng.random() ** 0.3 for _ in range(3)],
                )
            )
    write_bon32(data, records)
    # The verdicts are kept under the checkpoint folder: this test's, not the checkout's.
    monkeypatch.setenv("STEPLABEL_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    get_settings.cache_clear()
    figures = tmp_path / "figures.json"
    main(
        [
            "--corpus=bon32",
            f"--data={data}",
            "--model=tiny",
            "--epochs=2",
            "--half=calibration",
            "--judge=calibration",
            "--samples=8,32",
            "--seeds=2",
            "--workers=1",
            "--strategies=uniform,uncertain",
            f"--cache-dir={tmp_path / 'cache'}",
            f"--plot={tmp_path / 'plot.svg'}",
            f"--json={figures}",
        ]
    )
    get_settings.cache_clear()
    result = json.loads(figures.read_text())
    assert result["default_strategy"] == strategy_for_pool([32]).strategy
    assert "32 unlabeled samples per problem" in result["default_rule"]
    rows = result["rows"]
    primary = {(r["samples"], r["arm"], r["labels"]) for r in rows if r.get("primary")}
    arms_run = ["uniform", "uncertain", "uncertain, fixed"]
    assert primary == {(32, arm, labels) for arm in arms_run for labels in (32, 48)}
    for row in rows:
        for figure in ("f1", "auroc"):
            ratio = row["ratio"].get(figure)
            if ratio and ratio["status"] == "ok":
                assert ratio["low"] <= ratio["value"]
    assert {(r["strategy"], r.get("selector")) for r in rows if "arm" in r} == {
        ("uniform", "none"),
        ("uncertain", "retrain"),
        ("uncertain", "fixed"),
    }
    runs = [run for at in result["by_samples"] for run in at["runs"]]
    assert {r["rescorings"] for r in runs if r["selector"] == "fixed"} == {0}
    assert set(result["picks"]) == {"8", "32"}
    assert (tmp_path / "plot.svg").read_text().startswith("<svg")
