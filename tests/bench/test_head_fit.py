"""bench/head_fit.py: it trains the heads it names and prints one row for each."""

import pytest

from bench.head_fit import main, time_fit


def test_it_prints_a_row_per_head_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            ["--steps", "40", "--width", "8", "--hidden", "4,0", "--members", "2", "--repeats", "1"]
        )
        == 0
    )

    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 2 |")]
    assert [row.split("|")[2].strip() for row in rows] == ["4", "linear"]


def test_a_fit_takes_time_and_bad_sizes_are_refused() -> None:
    assert time_fit(steps=40, width=8, hidden=0, members=2, seed=0) > 0
    with pytest.raises(SystemExit):
        main(["--steps", "0"])
