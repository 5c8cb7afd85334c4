"""Rendering pages, and the fragments of them that htmx swaps in."""

import re
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader
from markdown_it import MarkdownIt
from markupsafe import Markup, escape

from app.answers import split_answer_section
from app.core.config import get_settings
from app.core.csrf import csrf_token
from app.models import UNNUMBERED_GENERATION

_ASY_BLOCK = re.compile(r"\[asy\](.*?)\[/asy\]", re.DOTALL)
# CommonMark without raw HTML: admins' markdown cannot inject markup or scripts.
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False})


def math_text(text: str | None) -> Markup:
    """Escaped text for KaTeX to typeset in the browser; Asymptote code shows as code."""
    if not text:
        return Markup("")
    parts = []
    position = 0
    for match in _ASY_BLOCK.finditer(text):
        parts.append(escape(text[position : match.start()]))
        parts.append(Markup('<pre class="asy"><code>{}</code></pre>').format(match.group(1)))
        position = match.end()
    parts.append(escape(text[position:]))
    return Markup("").join(parts)


def step_text(text: str | None) -> Markup:
    """A solution step for the labeling page: its ``# Answer`` heading, as PRM800K writes the
    final step, shows as an "Answer:" label before the answer, typeset as math."""
    body, answer = split_answer_section(text or "")
    if answer is None:
        return math_text(body)
    # PRM800K answers are bare LaTeX ("\\frac{1}{2}"); one that has its own delimiters keeps them.
    math = answer if "$" in answer or "\\(" in answer else f"${answer}$"
    return math_text(body) + Markup(
        '<span class="step-answer"><span class="step-answer-label">Answer:</span> {}</span>'
    ).format(math_text(math))


# Number formats, as filters rather than macros: a filter is a plain call, several times
# faster than a macro, and the agreement page formats thousands of cells.


def number(value: int | None) -> str:
    """A count with thousands separators; "—" where there is none."""
    return "—" if value is None else f"{value:,}"


def counted(value: int | None, noun: str, plural: str | None = None) -> str:
    """``1 label``, ``2,000 labels``: the number and the noun that agrees with it."""
    return f"{number(value)} {noun if value == 1 else plural or noun + 's'}"


def decimal(value: float | None, digits: int = 3) -> str:
    """A figure such as a kappa to ``digits`` decimals, thousands grouped as every other
    number on the pages (``1,100.2``); "—" where it is undefined."""
    return "—" if value is None else f"{value:,.{digits}f}"


def percent(value: float | None) -> str:
    """A share (0 to 1) as a percentage; "—" where it is undefined."""
    return "—" if value is None else f"{100 * value:.1f}%"


def filesize(value: int | None) -> str:
    """Bytes in binary units, three figures: ``512 B``, ``1.50 KiB``, ``515 MiB``; "—" where
    unknown."""
    if value is None:
        return "—"
    size, unit = float(value), "B"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, larger
    if unit == "B":
        return f"{value:,} B"
    decimals = 2 if size < 10 else 1 if size < 100 else 0
    return f"{size:.{decimals}f} {unit}"


_PATH_PART = re.compile(r"[^/_-]+[/_-]*|[/_-]+")


def path_parts(text: str | None) -> Markup:
    """A source path or id that a narrow column wraps between its parts (after ``/``, ``_``
    and ``-``), never inside one; "—" where there is none."""
    if not text:
        return Markup("—")
    parts = (Markup('<span class="part">{}</span>').format(p) for p in _PATH_PART.findall(text))
    return Markup("<wbr>").join(parts)


def markdown(text: str) -> Markup:
    """Admin-written markdown as safe HTML."""
    return Markup(_markdown.render(text))


def make_templates(directory: Path) -> Jinja2Templates:
    environment = Environment(
        loader=FileSystemLoader(directory),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["math_text"] = math_text
    environment.filters["step_text"] = step_text
    environment.filters["markdown"] = markdown
    environment.filters["number"] = number
    environment.filters["counted"] = counted
    environment.filters["decimal"] = decimal
    environment.filters["percent"] = percent
    environment.filters["filesize"] = filesize
    environment.filters["path_parts"] = path_parts
    # How long a task taken from the queue stays with its labeler, admins included.
    environment.globals["lease_minutes"] = lambda: get_settings().lease_minutes
    environment.globals["csrf_token"] = csrf_token
    environment.globals["unnumbered_generation"] = UNNUMBERED_GENERATION
    return Jinja2Templates(env=environment)


def render(
    request: Request,
    template_name: str,
    context: dict[str, Any],
    *,
    block: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    """Render a page, or only its named ``block`` (the fragment that htmx swaps in)."""
    templates: Jinja2Templates = request.app.state.templates
    context = {"user": getattr(request.state, "viewer", None), **context}
    # The same URL answers with a page or a fragment: caches must keep them apart.
    headers = {"Vary": "HX-Request"}
    if block is None:
        return templates.TemplateResponse(
            request, template_name, context, status_code=status_code, headers=headers
        )
    template = templates.get_template(template_name)
    render_block = template.blocks[block]
    html = "".join(render_block(template.new_context({"request": request, **context})))
    return HTMLResponse(html, status_code=status_code, headers=headers)


def wants_fragment(request: Request) -> bool:
    """An htmx swap, which takes a fragment; htmx's history restore needs the whole page."""
    headers = request.headers
    return (
        headers.get("HX-Request") == "true" and headers.get("HX-History-Restore-Request") != "true"
    )
