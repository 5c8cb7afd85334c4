"""Guidelines an admin saved before the wording fix say "below" after the migration."""

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core import schema
from app.core.db import make_engine
from app.labeling.service import DEFAULT_GUIDELINES, GUIDELINES_KEY
from app.models import ProjectSetting
from tests.conftest import DatabaseFactory

OLD_DEFAULT_START = (
    "# Labeling guidelines\n\nYou rate a model's solution to a math problem **one step at a"
    " time**, from the top. The\nreference answer above the problem is our current best guess"
    " at the correct answer: use\nit as a hint, not as proof."
)


@pytest.mark.parametrize(
    ("saved", "migrated"),
    [
        (
            OLD_DEFAULT_START + "\n\n## Our own rules\n",
            OLD_DEFAULT_START.replace(
                "The\nreference answer above the problem is",
                "The\nreference answer, below the problem, is",
            )
            + "\n\n## Our own rules\n",
        ),
        ("Rate carefully. The answer above is not a hint.", None),
    ],
    ids=["old-wording", "admins-own-text"],
)
def test_saved_guidelines_say_the_reference_answer_is_below(
    database_factory: DatabaseFactory, saved: str, migrated: str | None
) -> None:
    url = database_factory.new_url()
    schema.downgrade(url, "0008")
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            session.add(ProjectSetting(key=GUIDELINES_KEY, value=saved))
            session.add(ProjectSetting(key="overlap", value=2))
            session.commit()
        schema.upgrade(url)
        with Session(engine) as session:
            rows = session.execute(select(ProjectSetting.key, ProjectSetting.value)).all()
        stored = {key: value for key, value in rows}
        assert stored == {GUIDELINES_KEY: migrated or saved, "overlap": 2}
        schema.downgrade(url, "0008")
        schema.upgrade(url)
    finally:
        engine.dispose()


def test_the_default_guidelines_say_below_and_explain_written_steps() -> None:
    words = " ".join(DEFAULT_GUIDELINES.split())
    assert "reference answer, below the problem, is" in words and "above" not in words
    assert "write the step yourself" in words
