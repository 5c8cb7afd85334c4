"""The worker computes features once, before the first run needs them."""

from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import transaction
from app.datasets.demo_seed import seed
from app.training import WarmUp, warm_up
from worker.cycle import feature_cache, training_args_from
from worker.train import setup
from worker.warm import evaluation_items, pool_items, warm_feature_cache


def head_settings(tmp_path: Path, shared_data: Path, **changes: object) -> Settings:
    values: dict[str, object] = {
        "prm_base_model": "tiny",
        "train_mode": "head",
        "checkpoint_dir": tmp_path,
        "eval_dir": shared_data,
        "eval_processbench_per_subset": 2,
        "eval_best_of_n_problems": 1,
    }
    return Settings(**(values | changes))  # type: ignore[arg-type]


def test_warming_fills_the_cache_once(tmp_path: Path, shared_data: Path) -> None:
    settings = head_settings(tmp_path, shared_data)
    items = evaluation_items(settings)
    assert len(items) == 4 * 2 * 2 + 8  # calibration and test per subset, 8 samples

    # Long solutions are read in several windows (the tiny model's 512 bytes): one entry each.
    computed = warm_feature_cache(settings, None, lambda: False)
    assert computed >= len(items)
    assert warm_feature_cache(settings, None, lambda: False) == 0, "the second time, all cached"

    args = training_args_from(settings)
    model, _tokenizer, _ = setup(args)
    cache = feature_cache(settings, model, args)
    assert cache is not None and 0 < len(cache) <= computed  # identical windows share one


def test_warming_stops_when_asked_and_skips_other_modes(tmp_path: Path, shared_data: Path) -> None:
    full = head_settings(tmp_path, shared_data, train_mode="full")
    assert warm_feature_cache(full, None, lambda: False) == 0
    assert warm_feature_cache(head_settings(tmp_path, shared_data, eval_dir=None), None, bool) == 0
    assert not list(tmp_path.glob("feature-cache/*"))
    assert warm_feature_cache(head_settings(tmp_path, shared_data), None, lambda: True) == 0


def test_warming_covers_the_unlabeled_pool(
    tmp_path: Path, shared_data: Path, engine: Engine
) -> None:
    with transaction(engine) as session:
        seed(session)
    pool = pool_items(engine)
    assert pool, "the demo leaves solutions unqueued"
    settings = head_settings(tmp_path, shared_data, eval_dir=None)

    assert warm_feature_cache(settings, engine, lambda: False) >= len(pool)
    assert warm_feature_cache(settings, engine, lambda: False) == 0


def test_the_warm_up_notes_its_progress_for_the_prm_page(
    tmp_path: Path, shared_data: Path, engine: Engine
) -> None:
    with transaction(engine) as session:
        seed(session)
    total = len(pool_items(engine))
    seen: list[WarmUp | None] = []

    def should_stop() -> bool:  # asked between two chunks: the note is the warm-up's now
        with Session(engine) as session:
            seen.append(warm_up(session))
        return False

    warm_feature_cache(head_settings(tmp_path, shared_data, eval_dir=None), engine, should_stop)
    assert seen and all(noted is not None and noted.total == total for noted in seen)
    with Session(engine) as session:
        assert warm_up(session) is None  # done: no run waits on it
