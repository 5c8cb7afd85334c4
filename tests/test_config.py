import errno
import os
import re
import secrets
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.cli import main
from app.core.config import SettingsError, get_settings, session_secret
from app.main import create_app


def test_default_is_an_embedded_sqlite_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STEPLABEL_DATABASE_URL", raising=False)
    monkeypatch.chdir("/")  # no .env file to read
    assert get_settings().database_url == "sqlite:///./steplabel.db"


def test_postgres_url_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "postgresql+psycopg://postgres@127.0.0.1:5432/steplabel"
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", url)
    assert get_settings().database_url == url


@pytest.mark.parametrize("url", ["mysql://root@localhost/x", "steplabel.db", "postgres://x/y"])
def test_bad_database_url_names_the_setting(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", url)
    with pytest.raises(SettingsError, match=r"STEPLABEL_DATABASE_URL: .*unsupported database URL"):
        get_settings()


def test_bad_boolean_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPLABEL_SQL_ECHO", "maybe")
    with pytest.raises(SettingsError, match="STEPLABEL_SQL_ECHO"):
        get_settings()


def test_an_eval_dir_that_is_not_there_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STEPLABEL_EVAL_DIR", str(tmp_path / "evals"))
    with pytest.raises(SettingsError, match=r"STEPLABEL_EVAL_DIR: .*no directory at '.*/evals'"):
        get_settings()
    (tmp_path / "evals").mkdir()
    get_settings.cache_clear()
    assert get_settings().eval_dir == tmp_path / "evals"


def test_a_checkpoint_dir_that_is_a_file_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("STEPLABEL_CHECKPOINT_DIR", str(tmp_path / "a-file"))
    with pytest.raises(SettingsError, match=r"STEPLABEL_CHECKPOINT_DIR: .*is a file, not a folder"):
        get_settings()
    monkeypatch.setenv("STEPLABEL_CHECKPOINT_DIR", str(tmp_path / "not-there-yet"))
    get_settings.cache_clear()
    assert get_settings().checkpoint_dir == tmp_path / "not-there-yet"


def test_a_relative_checkpoint_dir_is_where_the_worker_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Runs store their checkpoints' paths: a path relative to one process's folder would be
    looked for (and pruned) in another's by a worker started elsewhere."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STEPLABEL_CHECKPOINT_DIR", "checkpoints")
    assert get_settings().checkpoint_dir == tmp_path.resolve() / "checkpoints"


def test_a_phase1_file_that_is_not_there_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STEPLABEL_TRAIN_PHASE1_LABELS", str(tmp_path / "phase1.jsonl.gz"))
    with pytest.raises(SettingsError, match=r"STEPLABEL_TRAIN_PHASE1_LABELS: .*no file at"):
        get_settings()
    (tmp_path / "phase1.jsonl.gz").write_bytes(b"")
    get_settings.cache_clear()
    assert get_settings().train_phase1_labels == tmp_path / "phase1.jsonl.gz"


@pytest.mark.parametrize("epochs", ["0", "1001", "99999999999999999999999"])
def test_epochs_past_their_bounds_name_the_setting(
    monkeypatch: pytest.MonkeyPatch, epochs: str
) -> None:
    monkeypatch.setenv("STEPLABEL_TRAIN_EPOCHS", epochs)
    with pytest.raises(SettingsError, match=r"STEPLABEL_TRAIN_EPOCHS"):
        get_settings()
    monkeypatch.setenv("STEPLABEL_TRAIN_EPOCHS", "1000")
    get_settings.cache_clear()
    assert get_settings().train_epochs == 1000


@pytest.mark.parametrize(
    ("variable", "refused", "taken"),
    [
        ("STEPLABEL_WORKER_POLL_SECONDS", ["inf", "nan", "1e20"], "86400"),
        ("STEPLABEL_TRAIN_EVERY_MINUTES", ["inf", "1e20"], "527040"),
        ("STEPLABEL_TRAIN_SEED", ["-1", str(2**31)], str(2**31 - 1)),
        ("STEPLABEL_TRAIN_SPLIT_SEED", ["-1"], "7"),
        ("STEPLABEL_TRAIN_LEARNING_RATE", ["inf"], "1e-3"),
    ],
)
def test_a_number_the_worker_cannot_use_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, variable: str, refused: list[str], taken: str
) -> None:
    """Accepted, these crashed the worker's loop (a timer past what it can sleep, a date
    past what it can add) or failed every run after training (a negative seed)."""
    for value in refused:
        monkeypatch.setenv(variable, value)
        get_settings.cache_clear()
        with pytest.raises(SettingsError, match=variable):
            get_settings()
    monkeypatch.setenv(variable, taken)
    get_settings.cache_clear()
    field = variable.removeprefix("STEPLABEL_").lower()
    assert getattr(get_settings(), field) == type(getattr(get_settings(), field))(taken)


def test_a_phase1_sample_takes_one_problem_or_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPLABEL_TRAIN_PHASE1_PROBLEMS", "0")
    with pytest.raises(SettingsError, match=r"STEPLABEL_TRAIN_PHASE1_PROBLEMS"):
        get_settings()
    monkeypatch.setenv("STEPLABEL_TRAIN_PHASE1_PROBLEMS", "30")
    get_settings.cache_clear()
    assert get_settings().train_phase1_problems == 30


def test_cli_fails_at_start_with_the_setting_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", "oracle://db")
    monkeypatch.setattr("sys.argv", ["steplabel", "migrate"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    assert "STEPLABEL_DATABASE_URL" in capsys.readouterr().err


# The session key


@pytest.fixture
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the session key is kept, with no key set in the environment."""
    monkeypatch.delenv("STEPLABEL_SECRET_KEY", raising=False)
    path = tmp_path / "keys" / "steplabel-secret.key"
    path.parent.mkdir()
    monkeypatch.setenv("STEPLABEL_SECRET_KEY_FILE", str(path))
    return path


@pytest.mark.parametrize("kept", ["", " \n\t\n", "abc", "k" * 31 + "\n"])
def test_a_short_key_in_the_file_stops_the_app(key_file: Path, kept: str) -> None:
    # Anyone could sign a cookie with such a key, and log in as anyone.
    key_file.write_text(kept)
    fix = f"{re.escape(str(key_file))} .* fewer than the 32 needed: delete it"
    with pytest.raises(SettingsError, match=fix):
        create_app()


@pytest.mark.parametrize("key", ["", " " * 40, "k" * 31])
def test_a_short_key_in_the_environment_stops_the_app(
    monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.setenv("STEPLABEL_SECRET_KEY", key)
    with pytest.raises(SettingsError, match=r"STEPLABEL_SECRET_KEY: .*at least 32 characters"):
        create_app()


def test_a_new_key_is_kept_and_read_again(key_file: Path) -> None:
    key = session_secret(get_settings())
    assert len(key) >= 32 and key_file.read_text() == key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert session_secret(get_settings()) == key
    assert list(key_file.parent.iterdir()) == [key_file]


def test_a_key_file_in_no_writable_folder_stops_the_app_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no-such-folder"
    monkeypatch.setenv("STEPLABEL_SECRET_KEY_FILE", str(missing / "steplabel-secret.key"))
    get_settings.cache_clear()
    expected = (
        f"cannot make a session key in {missing}: No such file or directory; set "
        "STEPLABEL_SECRET_KEY, or STEPLABEL_SECRET_KEY_FILE to a file in a folder this "
        "process may write"
    )
    with pytest.raises(SettingsError) as stopped:
        create_app()
    assert str(stopped.value) == expected
    assert not missing.exists()


def test_processes_starting_at_once_agree_on_one_key(
    key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts = 8
    # Each makes its key at the same moment: after it found no file, before it writes one.
    made_at_once = threading.Barrier(starts)
    token_urlsafe = secrets.token_urlsafe

    def at_once(length: int) -> str:
        made_at_once.wait()
        return token_urlsafe(length)

    monkeypatch.setattr(secrets, "token_urlsafe", at_once)
    with ThreadPoolExecutor(starts) as pool:
        keys = set(pool.map(lambda _: session_secret(get_settings()), range(starts)))
    assert keys == {key_file.read_text()}
    assert list(key_file.parent.iterdir()) == [key_file]


def test_a_key_that_could_not_be_written_whole_is_not_kept(
    key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full disk (or a crash) at the first start must not leave an empty key behind.
    def full_disk(_descriptor: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        session_secret(get_settings())
    assert list(key_file.parent.iterdir()) == []
