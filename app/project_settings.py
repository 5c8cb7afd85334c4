"""Project-wide values admins change at run time, over the defaults from the environment."""

import time
from typing import Annotated, Any

from pydantic import ConfigDict, TypeAdapter
from sqlalchemy import Connection, select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.models import PROJECT_SETTINGS, ProjectSetting

RUNTIME_KEYS = ("overlap", "qc_rate", "screening_threshold", "qc_min_answers")
"""Settings an admin may override in the database; the environment gives the defaults."""


def parse_runtime_value(key: str, text: str) -> Any:
    """``text`` as a value of the runtime setting ``key``, checked against the same bounds
    as its environment variable; raises pydantic's ValidationError otherwise."""
    field = Settings.model_fields[key]
    annotated: Any = Annotated[field.annotation, *field.metadata]
    # As Settings (allow_inf_nan=False): "nan" is no number, not one "greater than 1".
    config = ConfigDict(allow_inf_nan=False)
    return TypeAdapter(annotated, config=config).validate_python(text.strip())


def get_value(session: Session, key: str, default: Any = None) -> Any:
    value = session.scalar(select(ProjectSetting.value).where(ProjectSetting.key == key))
    return default if value is None else value


def set_value(session: Session, key: str, value: Any) -> None:
    row = session.get(ProjectSetting, key)
    if row is None:
        session.add(ProjectSetting(key=key, value=value))
    else:
        row.value = value
    session.flush()
    forget_cached()


def forget_cached() -> None:
    """Drop the cached values, so the next read comes from the database."""
    _cached.clear()


CACHE_SECONDS = 5.0
"""Every labeling request reads the runtime settings: a change applies within this time."""
_cached: dict[tuple[Any, ...], tuple[float, dict[str, Any]]] = {}


def runtime_settings(connection: Connection, settings: Settings) -> dict[str, Any]:
    """The RUNTIME_KEYS, each from the database where an admin set it, else the setting."""
    key = (connection.engine.url, *(getattr(settings, k) for k in RUNTIME_KEYS))
    hit = _cached.get(key)
    if hit is not None and time.monotonic() - hit[0] < CACHE_SECONDS:
        return hit[1]
    values = _read_runtime_settings(connection, settings)
    _cached[key] = (time.monotonic(), values)
    return values


_STORED_RUNTIME = select(PROJECT_SETTINGS.c.key, PROJECT_SETTINGS.c.value).where(
    PROJECT_SETTINGS.c.key.in_(RUNTIME_KEYS)
)


def _read_runtime_settings(connection: Connection, settings: Settings) -> dict[str, Any]:
    stored: dict[str, Any] = dict(connection.execute(_STORED_RUNTIME).all())
    return {key: stored.get(key, getattr(settings, key)) for key in RUNTIME_KEYS}
