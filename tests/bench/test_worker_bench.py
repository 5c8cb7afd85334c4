"""bench/worker.py: its rows and its profile, on the tiny model and the CPU."""

import json
from pathlib import Path

from bench.worker import main, padding_share


def test_the_rows_name_the_batch_and_the_profiles_name_the_operators(tmp_path: Path) -> None:
    rows_file, profile_file = tmp_path / "rows.jsonl", tmp_path / "profile.txt"

    status = main(
        ["--config", "tiny", "--device", "cpu", "--steps", "2", "--warmup-steps", "0",
         "--batch-size", "4", "--solutions", "6", "--score-batch-size", "3", "--pack",
         "--json", str(rows_file), "--profile", str(profile_file)]
    )  # fmt: skip

    assert status == 0
    train, score = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert (train["phase"], train["count"], train["batch"]) == ("train", "2 steps", "4")
    assert (score["phase"], score["count"], score["batch"]) == ("score", "6 solutions", "3")
    assert train["training"] == "full, sdpa, packed"
    assert int(train["tokens"].replace(",", "")) > 0
    profile = profile_file.read_text()
    assert profile.startswith("3 steps, ")  # the profile's own three steps, not the timed two
    assert "aten::mm" in profile  # the operator table, matrix products in it
    scoring = (tmp_path / "profile.score.txt").read_text()
    assert scoring.startswith("9 solutions, ")  # three batches of three
    assert "aten::mm" in scoring


def test_padding_share_counts_the_positions_padded_to_each_batchs_longest() -> None:
    # Batches [5, 3] and [2]: 2 x 5 + 1 x 2 = 12 positions, 10 of them tokens.
    assert padding_share([5, 3, 2], [[0, 1], [2]]) == 1 - 10 / 12


def test_filled_rows_report_the_solutions_a_batch_took(tmp_path: Path) -> None:
    rows_file = tmp_path / "rows.jsonl"

    main(
        ["--config", "tiny", "--device", "cpu", "--steps", "2", "--warmup-steps", "0",
         "--batch-size", "4", "--max-length", "1024", "--pack", "--pack-rows", "2",
         "--phases", "train", "--json", str(rows_file)]
    )  # fmt: skip

    (train,) = [json.loads(line) for line in rows_file.read_text().splitlines()]
    steps = int(train["count"].split()[0])
    assert train["batch"] == f"2 rows ({8 / steps:.1f})"  # 8 solutions over its steps
