"""Finding the final answer in solution text, and splitting a solution into steps."""

import re

ANSWER_HEADING = "# Answer"
_ANSWER_SECTION = re.compile(r"(?:^|\n)# Answer[ \t]*(?:\n(.*))?\Z", re.DOTALL)
_BOXED = re.compile(r"\\(?:boxed|fbox)\b")


def split_answer_section(text: str) -> tuple[str, str | None]:
    """The text before a trailing ``# Answer`` heading, and the answer after it (None when
    there is no heading or nothing after it), as PRM800K's last step carries them."""
    match = _ANSWER_SECTION.search(text)
    if match is None:
        return text, None
    return text[: match.start()].rstrip(), (match.group(1) or "").strip() or None


def answer_section(text: str) -> str | None:
    """The answer after a trailing ``# Answer`` heading, as PRM800K's last step carries it."""
    return split_answer_section(text)[1]


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox``, or ``\\boxed 5``) in ``text``."""
    matches = list(_BOXED.finditer(text))
    for match in reversed(matches):
        content = _boxed_content(text, match.end())
        if content is not None:
            return content
    return None


def _boxed_content(text: str, start: int) -> str | None:
    rest = text[start:]
    if rest.startswith(" "):
        # "\boxed 5" (no braces) ends at the next space, dollar sign or end of text.
        return re.split(r"[\s$]", rest.lstrip(" "), maxsplit=1)[0] or None
    if not rest.startswith("{"):
        return None
    depth = 0
    for offset, char in enumerate(rest):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return rest[1:offset].strip() or None
    return None  # unbalanced braces: no answer rather than half of one


def final_answer(steps: list[str]) -> str | None:
    """The final answer of a solution: its ``# Answer`` section, else its last ``\\boxed{}``."""
    if not steps:
        return None
    return answer_section(steps[-1]) or last_boxed("\n".join(steps))


def split_steps(solution: str) -> list[str]:
    """Split solution text into steps, one per non-empty line, as PRM800K does.

    The ``# Answer`` heading and the lines after it belong to the step before them, which is
    how PRM800K writes its final step ("...\\n\\n# Answer\\n\\n42").
    """
    lines = [line.strip() for line in solution.splitlines() if line.strip()]
    if ANSWER_HEADING not in lines:
        return lines
    heading = lines.index(ANSWER_HEADING)
    body, answer_lines = lines[:heading], lines[heading + 1 :]
    tail = "\n\n".join([ANSWER_HEADING, *answer_lines])
    if not body:
        return [tail]
    return [*body[:-1], f"{body[-1]}\n\n{tail}"]
