"""Content keys: what makes two rows "the same", so that re-imports add nothing and a label
submitted twice is stored once (the importers and the labeling service both use them)."""

import hashlib
import json
import re
import unicodedata
from datetime import datetime

_LATEX_NOISE = re.compile(r"\\(left|right|displaystyle|textstyle|[,;:! ])|[\s$\\{}]")


def content_key(*parts: object) -> str:
    """A sha256 hex digest of the parts, stable across runs and databases."""
    encoded = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(encoded.encode()).hexdigest()


def problem_key(text: str, answer: str | None, solution: str | None) -> str:
    return content_key("problem", text, answer, solution)


def problem_text_key(text: str) -> str:
    return content_key("problem-text", text)


def normalized_problem(text: str) -> str:
    """A problem's text with what typesetting varies removed: case, whitespace, dollar
    signs, braces, backslashes and LaTeX's sizing and spacing commands, a trailing period.

    Two copies of one problem (ProcessBench's and PRMBench's MATH problems, an import that
    escaped ``$`` as ``\\$``) give the same string, so an evaluation set can leave out the
    problems a PRM trained on. Distinct problems rarely collide; when they do, an item is
    left out of evaluation, never leaked into it.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _LATEX_NOISE.sub("", folded).rstrip(".")


def solution_key(
    problem_id: int, steps: list[str] | None, answer: str | None, score: float | None
) -> str:
    return content_key("solution", problem_id, steps, answer, score)


def label_key(
    labeler_uuid: str, timestamp: datetime, problem_id: int, solution_id: int | None
) -> str:
    return content_key("label", labeler_uuid, timestamp.isoformat(), problem_id, solution_id)
