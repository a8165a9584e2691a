"""Rendering: a Digest into email (HTML + text), Slack messages and terminal text; the papers
sent to a subscriber into their Atom feed (`bot.render.atom`).

This package owns the Jinja2 environment over the `templates/` folder and the filters every
template shares. Rendering is pure: it reads templates and nothing else; it never sends,
never opens a database and never reads the clock (callers pass `now`).

Templates live at the top of the repository (`templates/`) in a source checkout or an
editable install, and inside the package (`bot/templates`) in an installed wheel.
"""

from __future__ import annotations

import functools
import importlib.resources
from pathlib import Path

import jinja2

from bot.core.links import web_url
from bot.render.text import FILTERS

__all__ = ["compile_templates", "template_env", "templates_dir"]


def templates_dir() -> Path:
    """The folder holding the Jinja2 templates: packaged first, then the source checkout."""
    packaged = importlib.resources.files("bot") / "templates"
    if isinstance(packaged, Path) and packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parent.parent.parent / "templates"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(
        f"paperbell templates not found: looked in {packaged} and {checkout}; "
        "reinstall the package or run from a full source checkout"
    )


@functools.cache
def template_env() -> jinja2.Environment:
    """The shared Jinja2 environment: autoescaped HTML, strict undefined, shared filters."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        autoescape=jinja2.select_autoescape(["html", "html.j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,  # templates ship with the package: each is compiled once
    )
    env.filters.update(FILTERS)
    # `url|web_url`: the URL if it may become a link (http or https), else None.
    env.filters["web_url"] = web_url
    return env


def compile_templates(folder: str) -> int:
    """Compile every template under `folder/` now (each is compiled once, on first use):
    a render worker does it while its run is being planned, not while the run's first
    digest waits (~0.1 s for email/ on a slow machine). How many were compiled."""
    env = template_env()
    names = env.list_templates(filter_func=lambda name: name.startswith(f"{folder}/"))
    for name in names:
        env.get_template(name)
    return len(names)
