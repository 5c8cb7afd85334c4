"""Rendering pages, and the fragments of them that htmx swaps in."""

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates


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
