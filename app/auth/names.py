"""Names of users and API tokens, checked the same way wherever one is given."""

import unicodedata

from app.models import User

JOINERS = "\u200c\u200d"
"""The zero-width non-joiner and joiner: invisible, but part of how Persian names and some
emoji are written."""


MAX_NAME_LENGTH = User.name.type.length


def clean_name(name: str) -> str:
    """The name without the spaces around it; ValueError for an empty or overlong one, or
    one with control or invisible characters: a right-to-left override (U+202E) would
    show "evil" as "live" in every list of users."""
    name = name.strip()
    if not name:
        raise ValueError("give the user a name")
    if MAX_NAME_LENGTH is not None and len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"a name has at most {MAX_NAME_LENGTH} characters")
    hidden = [c for c in name if unicodedata.category(c).startswith("C") and c not in JOINERS]
    if hidden:
        codes = ", ".join(f"U+{ord(c):04X}" for c in dict.fromkeys(hidden))
        raise ValueError(f"a name must not hold control or invisible characters ({codes})")
    return name
