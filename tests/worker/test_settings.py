"""The worker's settings: what the head and the selection are told, and what is refused."""

import dataclasses
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from app.core.config import Settings
from app.pool_shape import BY_POOL_SHAPE
from worker.cycle import check_settings, training_args_from
from worker.select import STRATEGIES
from worker.training_args import TrainingArgs


def test_every_selection_strategy_can_be_set() -> None:
    setting = get_args(Settings.model_fields["select_strategy"].annotation)
    assert setting == (*STRATEGIES, BY_POOL_SHAPE)


def test_the_head_reads_what_the_settings_say() -> None:
    settings = Settings(
        prm_base_model="tiny",
        train_mode="head",
        train_head_readings="end@1, mean@0.75",
        train_head_members=3,
        train_head_hidden=16,
    )

    args = training_args_from(settings)

    assert args.head_readings == ("end@1", "mean@0.75")
    assert (args.head_members, args.head_hidden) == (3, 16)


@pytest.mark.parametrize(
    ("precision", "bf16", "master_weights"),
    [
        ("auto", None, False),
        ("fp32", False, False),
        ("bf16", True, False),
        ("bf16-master", True, True),
    ],
)
def test_the_training_precision_and_speed_settings_reach_the_training_arguments(
    precision: str, bf16: bool | None, master_weights: bool
) -> None:
    settings = Settings(
        prm_base_model="tiny",
        train_precision=precision,
        train_pack=True,
        train_pack_rows=5,
        train_compile=True,
    )

    args = training_args_from(settings)

    assert (args.bf16, args.master_weights) == (bf16, master_weights)
    assert args.pack and args.compile and args.pack_rows == 5
    default = training_args_from(Settings(prm_base_model="tiny"))
    assert not default.pack and default.pack_rows == 0


def test_a_reading_the_cache_does_not_hold_is_refused() -> None:
    settings = Settings(prm_base_model="tiny", train_mode="head", train_head_readings="end@2")
    with pytest.raises(ValueError) as refused:
        check_settings(settings)
    assert str(refused.value) == (
        "invalid training arguments: STEPLABEL_TRAIN_HEAD_READINGS=end@2 "
        "(the head mode reads end@1, end@0.75, end@0.5, mean@1, mean@0.75)"
    )


def test_disagreement_needs_a_head_of_several_members(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lone = Settings(prm_base_model="tiny", train_mode="head", select_strategy="disagreement")
    with pytest.raises(ValueError, match="STEPLABEL_TRAIN_HEAD_MEMBERS to 2 or more"):
        check_settings(lone)
    check_settings(lone.model_copy(update={"train_head_members": 2}))
    full = lone.model_copy(update={"train_mode": "full", "train_head_members": 2})
    with pytest.raises(ValueError, match="full mode trains one: set STEPLABEL_TRAIN_MODE=head"):
        check_settings(full)

    from app.core.config import get_settings
    from worker.__main__ import main

    monkeypatch.setenv("STEPLABEL_PRM_BASE_MODEL", "tiny")
    monkeypatch.setenv("STEPLABEL_TRAIN_MODE", "head")
    monkeypatch.setenv("STEPLABEL_SELECT_STRATEGY", "disagreement")
    get_settings.cache_clear()
    try:
        assert main(["once"]) == 2
    finally:
        get_settings.cache_clear()
    assert "STEPLABEL_TRAIN_HEAD_MEMBERS" in capsys.readouterr().err


def test_help_needs_no_settings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--help (or a wrong word) is answered before the settings are read: a bad setting
    does not hide how to use the command."""
    from app.core.config import get_settings
    from worker.__main__ import main

    monkeypatch.setenv("STEPLABEL_WORKER_POLL_SECONDS", "0")
    get_settings.cache_clear()
    try:
        with pytest.raises(SystemExit) as helped:
            main(["--help"])
        assert helped.value.code == 0
        assert "[loop | once | prepare [NAME]" in capsys.readouterr().out
        with pytest.raises(SystemExit) as refused:
            main(["twice"])
        assert refused.value.code == 2 and "invalid choice: 'twice'" in capsys.readouterr().err
        assert main(["once"]) == 2
        assert "STEPLABEL_WORKER_POLL_SECONDS" in capsys.readouterr().err
    finally:
        get_settings.cache_clear()


OUT_OF_BOUNDS = {
    "learning_rate": 0,
    "epochs": 0,
    "batch_size": 0,
    "max_length": 1,
    "warmup_ratio": 1.0,
    "weight_decay": -0.1,
    "pack_rows": -1,
    "backbone_depth": 1.5,
    "head_members": 0,
    "head_hidden": -1,
    "seed": -1,
}


@pytest.mark.parametrize(("argument", "value"), OUT_OF_BOUNDS.items())
def test_a_training_setting_and_its_argument_share_one_bound(argument: str, value: float) -> None:
    """Settings refuses what TrainingArgs would: both are declared with app/core/config.py's
    bound types, so the worker never meets a setting it cannot train with."""
    with pytest.raises(ValidationError, match=f"train_{argument}"):
        Settings(**{f"train_{argument}": value})
    with pytest.raises(ValidationError, match=argument):
        TrainingArgs(**{argument: value})


def test_the_split_is_no_training_argument() -> None:
    """The held-out share is the split's (``Split.of(settings)``), not the training's."""
    assert "held_out_fraction" not in {f.name for f in dataclasses.fields(TrainingArgs)}
    with pytest.raises(ValidationError, match="held_out_fraction"):
        TrainingArgs(held_out_fraction=0.2)  # type: ignore[call-arg]


def test_a_database_out_of_reach_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from app.core.config import get_settings
    from worker.__main__ import main

    url = f"sqlite:///{tmp_path}/no-such-folder/steplabel.db"
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        assert main(["once"]) == 2
    finally:
        get_settings.cache_clear()
    err = capsys.readouterr().err
    assert err.splitlines() == ["cannot open the database: unable to open database file"]


def test_a_base_model_that_is_no_model_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"STEPLABEL_PRM_BASE_MODEL='smollm2' is neither 'tiny'"):
        check_settings(Settings(prm_base_model="smollm2"))
    # A folder without a model in it failed each run at its train step, one run a cycle.
    with pytest.raises(ValueError, match=r"nor a folder holding a model \(a config.json"):
        check_settings(Settings(prm_base_model=str(tmp_path)))
    (tmp_path / "config.json").write_text("{}")
    checkpoint = tmp_path / "run-7"
    checkpoint.mkdir()
    (checkpoint / "meta.json").write_text("{}")
    for base in ("tiny", "smollm2-135m", str(tmp_path), str(checkpoint)):
        check_settings(Settings(prm_base_model=base))  # a prepared name needs no files yet
