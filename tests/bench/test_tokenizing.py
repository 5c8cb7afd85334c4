"""bench.tokenizing: both ways timed, on real ProcessBench text, and checked equal."""

from pathlib import Path

import pytest

from bench.tokenizing import main


def test_the_bench_times_both_ways(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model", "tiny", "--data", str(shared_data), "--solutions", "40"]) == 0

    printed = capsys.readouterr().out
    assert printed.startswith("40 solutions, ")
    assert "a call a solution: " in printed and "one call for all: " in printed
    assert "x (best of 3 runs each)" in printed


def test_a_missing_model_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--model", str(tmp_path / "nowhere")])

    assert "nowhere is not a prepared model" in capsys.readouterr().err
