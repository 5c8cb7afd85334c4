"""uvicorn's command line, with each commit that wrote to the assignments table (taking or
finishing a task) taking SLOW_COMMIT_S longer, as on a loaded database.

The browser tests of requests that follow each other at once run the app under this, so
that a server answering before it commits shows, whatever the speed of the machine.

The delay is set up only when this runs as the server: the tests import SLOW_COMMIT_S from
here, and a listener added on import would slow every commit of every test process.
"""

import re
import time
from typing import Any

import uvicorn
from sqlalchemy import Connection, Engine, event

SLOW_COMMIT_S = 1.0
_WRITES_ASSIGNMENTS = re.compile(r"^\s*(INSERT INTO|UPDATE) assignments\b", re.IGNORECASE)


def note_assignment_write(
    connection: Connection, _cursor: Any, statement: str, *_args: Any
) -> None:
    if _WRITES_ASSIGNMENTS.match(statement):
        connection.info["wrote_assignments"] = True


def delay_commit(connection: Connection) -> None:
    if connection.info.pop("wrote_assignments", False):
        time.sleep(SLOW_COMMIT_S)


def slow_down_commits() -> None:
    """Every engine of this process: a commit that wrote to the assignments table sleeps."""
    event.listen(Engine, "before_cursor_execute", note_assignment_write)
    event.listen(Engine, "commit", delay_commit)


if __name__ == "__main__":
    slow_down_commits()
    uvicorn.main()
