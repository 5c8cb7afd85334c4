import pytest

from app.cli import main
from app.config import SettingsError, get_settings


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


def test_cli_fails_at_start_with_the_setting_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", "oracle://db")
    monkeypatch.setattr("sys.argv", ["steplabel", "migrate"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    assert "STEPLABEL_DATABASE_URL" in capsys.readouterr().err
