"""arXiv's category taxonomy as data (`bot/data/arxiv_categories.toml`, read by
`bot.core.categories`): complete, well formed, and naming every category of a real day."""

from __future__ import annotations

import re

from bot.core.categories import archive_names, category_name, category_names, category_words
from bot.core.models import Paper

CODE = re.compile(r"(?P<archive>[a-z]+(?:-[a-z]+)?)(?:\.(?P<subject>[A-Za-z]+(?:-[a-z]+)?))?")


def test_the_taxonomy_lists_every_category_once_each_in_its_archive() -> None:
    categories = category_names()
    archives = archive_names()
    assert len(categories) == 155  # arXiv's list; a new category is added here
    assert len(archives) == 20
    for code, name in {**categories, **archives}.items():
        match = CODE.fullmatch(code)
        assert match is not None, code
        assert match["archive"] in archives, code
        assert name == name.strip() and name and "  " not in name, code
    # The archives that are a single category name it the same way.
    for code in ("quant-ph", "hep-th", "gr-qc", "math-ph", "nucl-th"):
        assert categories[code] == archives[code]


def test_categories_in_words() -> None:
    assert category_words("cs.LG") == "Machine Learning (cs.LG)"
    assert category_words("cs.CL") == "Computation and Language (cs.CL)"
    assert category_words("stat.ML") == "Machine Learning (stat.ML)"
    assert category_words("cs") == "Computer Science (cs)"
    assert category_words("cond-mat.str-el") == "Strongly Correlated Electrons (cond-mat.str-el)"
    assert category_words("cs.XX") == "cs.XX"  # not arXiv's: shown as itself
    assert category_name("CS.LG") is None  # codes are arXiv's spelling, as stored


def test_every_category_of_a_real_day_has_a_name(full_feed_papers: tuple[Paper, ...]) -> None:
    seen = {category for paper in full_feed_papers for category in paper.categories}
    assert len(seen) > 100
    assert sorted(code for code in seen if category_name(code) is None) == []
