"""arXiv's categories in words: `cs.LG` is "Machine Learning (cs.LG)".

The taxonomy is data (`bot/data/arxiv_categories.toml`: every category and archive code
with its name as arXiv lists it), read once. Pure but for that read of the package's own
file; a code the taxonomy does not know is shown as itself.
"""

from __future__ import annotations

import functools
import tomllib
from importlib.resources import files

__all__ = ["archive_names", "category_name", "category_names", "category_words"]


@functools.cache
def _taxonomy() -> tuple[dict[str, str], dict[str, str]]:
    """The bundled taxonomy: (categories, archives), each code -> name."""
    text = files("bot").joinpath("data/arxiv_categories.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    categories = {str(code): str(name) for code, name in data["categories"].items()}
    archives = {str(code): str(name) for code, name in data["archives"].items()}
    return categories, archives


def category_names() -> dict[str, str]:
    """Every arXiv category code and its name (a copy)."""
    return dict(_taxonomy()[0])


def archive_names() -> dict[str, str]:
    """Every arXiv archive code (`cs`, `astro-ph`) and its name (a copy)."""
    return dict(_taxonomy()[1])


def category_name(code: str) -> str | None:
    """The name arXiv gives the category or archive `code` (`Machine Learning` for `cs.LG`,
    `Computer Science` for `cs`); None for a code it does not list."""
    categories, archives = _taxonomy()
    return categories.get(code) or archives.get(code)


def category_words(code: str) -> str:
    """`Machine Learning (cs.LG)`; a code the taxonomy does not know, as itself."""
    name = category_name(code)
    return f"{name} ({code})" if name else code
