"""No code of ours reaches into SQLAlchemy's private names: they change between versions
without notice, and the pin on SQLAlchemy must be free to move to its next minor version."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("app", "worker", "bench")

PRIVATE_IMPORT = re.compile(
    r"^\s*(?:from\s+sqlalchemy[\w.]*\s+import\s+\(?[\w\s,]*\b_[a-z]"
    r"|(?:from|import)\s+sqlalchemy[\w.]*\._[a-z])",
    re.M,
)
KNOWN_PRIVATE = re.compile(
    r"\._(?:result_columns|cached_result_processor|cached_bind_processor|bind_processor"
    r"|compiler_dispatch|execute_clauseelement|raw_columns|from_objects|annotations"
    r"|generate|clone|compile_w_cache|dbapi_connection|sa_instance_state)\b"
)
ATTRIBUTE = re.compile(r"\b(\w+)\.(_[a-z]\w*)")
PUBLIC_UNDERSCORE = {"_asdict", "_mapping", "_fields", "_t", "_tuple", "_make", "_replace"}
"""Row's documented names (a named tuple's), underscored to keep clear of column names."""
NOT_SQLALCHEMY = {("app/grading.py", "pool._processes"), ("app/grading.py", "os._exit")}
"""Other libraries' underscored names, in modules that also use SQLAlchemy: a multiprocessing
pool's processes (to end them when a grading times out) and ``os._exit`` (documented, public:
a pool worker ends at once when its grading process has died)."""


def _sources() -> dict[Path, str]:
    paths = sorted(path for folder in SOURCES for path in (ROOT / folder).rglob("*.py"))
    return {path.relative_to(ROOT): path.read_text() for path in paths}


def test_no_private_sqlalchemy_import() -> None:
    found = [
        f"{path}: {match.group(0).strip()}"
        for path, text in _sources().items()
        for match in PRIVATE_IMPORT.finditer(text)
    ]
    assert not found, "private SQLAlchemy imports:\n" + "\n".join(found)


def test_no_private_sqlalchemy_attribute() -> None:
    found = [
        f"{path}:{number}: {line.strip()}"
        for path, text in _sources().items()
        for number, line in enumerate(text.splitlines(), start=1)
        if _is_private_access(str(path), line.split("#")[0], _uses_sqlalchemy(text))
    ]
    assert not found, "private attributes of what may be SQLAlchemy's objects:\n" + "\n".join(found)


def _uses_sqlalchemy(text: str) -> bool:
    return re.search(r"^\s*(?:from|import)\s+sqlalchemy", text, re.M) is not None


def _is_private_access(path: str, code: str, uses_sqlalchemy: bool) -> bool:
    """SQLAlchemy's private names we once used or might reach for, anywhere; and in a
    module that imports SQLAlchemy, any ``name._attribute`` not on our own object."""
    if KNOWN_PRIVATE.search(code):
        return True
    return uses_sqlalchemy and any(
        owner not in ("self", "cls")
        and name not in PUBLIC_UNDERSCORE
        and (path, f"{owner}.{name}") not in NOT_SQLALCHEMY
        for owner, name in ATTRIBUTE.findall(code)
    )
