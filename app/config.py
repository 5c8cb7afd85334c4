"""Settings, read from the environment (prefix ``STEPLABEL_``) or a ``.env`` file."""

import secrets
from functools import lru_cache
from pathlib import Path

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "STEPLABEL_"
SUPPORTED_DATABASES = ("sqlite", "postgresql+psycopg")


class SettingsError(RuntimeError):
    """A setting is missing or malformed; the message names the environment variable."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=".env", extra="ignore")

    database_url: str = "sqlite:///./steplabel.db"
    """SQLite (the embedded default) or ``postgresql+psycopg://user@host:port/db``."""

    sql_echo: bool = False
    """Log every SQL statement (debugging)."""

    secret_key: str | None = Field(default=None, min_length=32)
    """Signs session cookies. Unset: a random key kept in ``secret_key_file``."""

    secret_key_file: Path = Path("steplabel-secret.key")

    secure_cookies: bool = False
    """Send the session cookie over HTTPS only (set it behind TLS)."""

    lease_minutes: int = Field(default=30, ge=1, le=24 * 60)
    """How long a task stays with a labeler before it returns to the queue."""

    overlap: int = Field(default=1, ge=1, le=100)
    """Distinct labelers per solution, unless a solution sets its own."""

    qc_rate: float = Field(default=0.05, ge=0.0, le=1.0)
    """Share of tasks that are quality-control questions, while any are left."""

    screening_threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    """Share of a gold label's step ratings a labeler must match to pass screening and QC."""

    # The PRM worker (python -m worker).
    prm_base_model: str = "tiny"
    """A local Hugging Face checkpoint directory, or ``tiny`` (built in code, for demos)."""

    checkpoint_dir: Path = Path("checkpoints")

    worker_poll_seconds: float = Field(default=30.0, gt=0)

    train_every_minutes: float = Field(default=60.0, ge=0)
    """Start a run this long after the last one began; 0 turns the timer off."""

    train_min_new_labels: int = Field(default=50, ge=0)
    """Start a run once this many labels arrived since the last; 0 turns this off."""

    train_include_quality_control: bool = False
    train_include_screening: bool = False

    select_per_problem: int = Field(default=4, ge=1)
    """Solutions queued per problem by each active-learning selection."""

    select_wrong_share: float = Field(default=0.8, ge=0.0, le=1.0)
    """Share of a selection that is convincing wrong-answer solutions."""

    select_global_top_k: int | None = Field(default=None, ge=1)
    """Select the top K over the whole pool instead of K per problem."""

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, url: str) -> str:
        scheme = url.split("://", 1)[0]
        if "://" not in url or scheme not in SUPPORTED_DATABASES:
            raise ValueError(
                f"unsupported database URL {url!r}: use sqlite:///PATH "
                "or postgresql+psycopg://USER@HOST:PORT/DATABASE"
            )
        return url


def describe_validation_error(error: ValidationError) -> str:
    """Turn pydantic's error into lines that name the environment variables."""
    lines = []
    for problem in error.errors():
        field = ".".join(str(part) for part in problem["loc"])
        lines.append(f"{ENV_PREFIX}{field.upper()}: {problem['msg']}")
    return "; ".join(lines)


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings; a bad value raises SettingsError naming the variable."""
    try:
        return Settings()
    except ValidationError as error:
        raise SettingsError(f"invalid settings: {describe_validation_error(error)}") from None


def session_secret(settings: Settings) -> str:
    """The cookie-signing key: the setting, else one made once and kept in a file."""
    if settings.secret_key:
        return settings.secret_key
    path = settings.secret_key_file
    if not path.exists():
        path.write_text(secrets.token_urlsafe(48))
        path.chmod(0o600)
    return path.read_text().strip()
