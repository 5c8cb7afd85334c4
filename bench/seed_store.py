"""A folder of finished seeds, so that a long bench stopped partway goes on where it was.

A bench whose seeds are independent (each one's results depend on its seed alone) writes
each finished seed's results here as it gets them, and a later run with the same options
takes them back instead of running those seeds again. The folder holds ``options.json``, the
options that decide the results (and the commit of the code that ran), and one pickle per
seed. A run whose options differ is refused: its results would mix with others. The commit
is kept to show, not compared: the figures of a seed made by other code are the user's to
trust or to remove (a different commit is printed as a warning).
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

OPTIONS = "options.json"


def current_commit() -> str:
    """The checkout's commit (with ``+changes`` when its tracked files differ), or "unknown"."""
    try:
        commit = _git("rev-parse", "--short", "HEAD")
        changed = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+changes" if changed else "")


def _git(*arguments: str) -> str:
    done = subprocess.run(
        ["git", *arguments], capture_output=True, text=True, check=True, timeout=10
    )
    return done.stdout.strip()


class SeedStore:
    """Finished seeds' results under ``folder``, for the options ``deciding``."""

    def __init__(self, folder: Path, deciding: dict[str, Any], commit: str | None = None) -> None:
        self.folder = folder
        self.deciding = json.loads(json.dumps(deciding, default=str))  # as the file holds them
        self.commit = current_commit() if commit is None else commit
        folder.mkdir(parents=True, exist_ok=True)
        written = folder / OPTIONS
        if not written.exists():
            record = {"options": self.deciding, "commit": self.commit}
            written.write_text(json.dumps(record, indent=2) + "\n")
            return
        record = json.loads(written.read_text())
        differing = sorted(
            key
            for key in record["options"].keys() | self.deciding.keys()
            if record["options"].get(key) != self.deciding.get(key)
        )
        if differing:
            raise SystemExit(
                f"{folder} holds seeds run with other options ({', '.join(differing)}): "
                "give another folder, or remove this one"
            )
        if record["commit"] != self.commit:
            print(
                f"warning: {folder}'s seeds were run at commit {record['commit']}, this is "
                f"{self.commit}",
                file=sys.stderr,
            )

    def _path(self, seed: int) -> Path:
        return self.folder / f"seed-{seed}.pickle"

    def load(self, seed: int) -> Any | None:
        """The seed's results, or None when it has not finished."""
        path = self._path(seed)
        if not path.exists():
            return None
        with path.open("rb") as source:
            # The folder is this bench's own output, as trusted as whoever names it.
            return pickle.load(source)

    def save(self, seed: int, results: Any) -> None:
        """Keep the seed's results; a run stopped while writing leaves no partial file."""
        path = self._path(seed)
        partial = path.with_suffix(".partial")
        with partial.open("wb") as out:
            pickle.dump(results, out)
        partial.replace(path)
