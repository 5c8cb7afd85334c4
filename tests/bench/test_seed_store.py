"""bench/seed_store.py: finished seeds kept, and taken back only under the same options."""

from pathlib import Path

import pytest

from bench.seed_store import SeedStore


def test_a_seed_comes_back_as_saved_and_an_unfinished_one_as_none(tmp_path: Path) -> None:
    store = SeedStore(tmp_path, {"budgets": "100,200"}, commit="abc1234")

    store.save(3, (12.5, ["runs"]))

    again = SeedStore(tmp_path, {"budgets": "100,200"}, commit="abc1234")
    assert again.load(3) == (12.5, ["runs"])
    assert again.load(4) is None
    assert not list(tmp_path.glob("*.partial"))


def test_other_options_are_refused_and_other_code_is_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    SeedStore(tmp_path, {"budgets": "100,200", "head": "all"}, commit="abc1234")

    with pytest.raises(SystemExit, match=r"other options \(budgets\)"):
        SeedStore(tmp_path, {"budgets": "100,400", "head": "all"}, commit="abc1234")
    SeedStore(tmp_path, {"budgets": "100,200", "head": "all"}, commit="def5678")
    assert "run at commit abc1234, this is def5678" in capsys.readouterr().err
