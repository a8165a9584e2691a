"""Rendering: a Digest into email (HTML + text), Slack messages and terminal text; the papers
sent to a subscriber into their Atom feed (`bot.render.atom`).

This package owns the Jinja2 environment over the `templates/` folder and the filters every
template shares. Rendering is pure: it reads templates and nothing else; it never sends,
never opens a database and never reads the clock (callers pass `now`).

Each language has its own environment (`template_env(language)`), made once and kept:
Jinja2's i18n extension binds its gettext to an environment, and a shared one would make
renders in different languages race. Templates mark their words with `_()` and
`ngettext()` (new-style: escaped, `%(name)s` filled in), read from `bot.render.words`.

Templates live at the top of the repository (`templates/`) in a source checkout or an
editable install, and inside the package (`bot/templates`) in an installed wheel.
"""

from __future__ import annotations

import functools
import importlib.resources
from pathlib import Path

import jinja2

from bot.core.languages import ENGLISH, language_name
from bot.core.links import web_url
from bot.render.text import FILTERS
from bot.render.words import words_for

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


def template_env(language: str | None = ENGLISH) -> jinja2.Environment:
    """The Jinja2 environment for a reader of `language` (a BCP 47 tag; English when it has
    no catalog): autoescaped HTML, strict undefined, shared filters, its words translated."""
    return _language_env(words_for(language).tag)


@functools.cache
def _language_env(tag: str) -> jinja2.Environment:
    """One environment a catalog: its templates compiled once, its gettext its own."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        autoescape=jinja2.select_autoescape(["html", "html.j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,  # templates ship with the package: each is compiled once
        extensions=["jinja2.ext.i18n"],
    )
    # `{% trans %}` blocks are one line of words, however the template wraps them.
    env.policies["ext.i18n.trimmed"] = True
    words = words_for(tag)
    env.install_gettext_translations(words.translations, newstyle=True)  # type: ignore[attr-defined]
    env.globals["language"] = words.tag
    # Dates as the language writes them: `28 Nov 2024` / `2024年11月28日`, `28 Nov`, `Monday`.
    env.filters["date"] = words.short_date
    env.filters["day_month"] = words.day_month
    env.filters["weekday"] = words.weekday
    # A language's name in the reader's language: `zh` -> `Chinese`, `中文`.
    env.filters["language_name"] = functools.partial(language_name, in_language=words.tag)
    env.filters.update(FILTERS)
    # `url|web_url`: the URL if it may become a link (http or https), else None.
    env.filters["web_url"] = web_url
    return env


def compile_templates(folder: str, language: str | None = ENGLISH) -> int:
    """Compile every template under `folder/` now (each is compiled once, on first use):
    a render worker does it while its run is being planned, not while the run's first
    digest waits (~0.1 s for email/ on a slow machine). How many were compiled."""
    env = template_env(language)
    names = env.list_templates(filter_func=lambda name: name.startswith(f"{folder}/"))
    for name in names:
        env.get_template(name)
    return len(names)
