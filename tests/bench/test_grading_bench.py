"""bench/grading.py: the bon32 pool's answers graded, a rate per repeat."""

import re
from pathlib import Path

import pytest

from bench.grading import main


def test_each_repeat_grades_every_answer_of_the_first_problems(
    shared_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--data", str(shared_data), "--problems", "2", "--repeats", "2"]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "math500: 64 answers of 2 problems"
    rates = [
        float(m[1])
        for line in lines[1:3]
        if (m := re.fullmatch(r"repeat \d: ([\d.]+) answers/s", line))
    ]
    assert len(rates) == 2 and all(rate > 0 for rate in rates)
    assert lines[3].startswith("median ") and lines[3].endswith(" answers/s over 2 repeats")
