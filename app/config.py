"""Settings, read from the environment (prefix ``STEPLABEL_``) or a ``.env`` file."""

from functools import lru_cache

from pydantic import ValidationError, field_validator
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
