"""The view model of a digest: what the renderers show of each paper and each rule.

Owns what email, Slack and Apprise all compute from a digest, in three parts:

- `models`: the views themselves, data: one paper's (`ItemView`: its categories in
  arXiv's words, its upvotes as a number, its quiet line's links), a rule as shown
  (`RuleName`: its label, or the rule in words, never its syntax), a rule's papers
  (`GroupView`), how much of each paper's text is shown (`TextLength`), the layouts.
- `papers`: the views made from a digest: one paper's (`item_view`: its title and abstract
  highlighted, its markers, its links checked by `bot.core.links.web_url`, one per
  destination), the digest's groups of
  numbered papers (`group_views`), the days of its papers (`day_span`).
- `texts`: its summaries and translations, when the subscriber asked for them and the
  digest carries them (`texts_view`), its layout (`layout_of`) and what it says in words
  (`summaries_note`, `shown_note`, `ranking_note`, `texts_note`).

Shared by `bot.render.email`, `bot.render.slack` and `bot.render.apprise`, which lay these
out, each for its medium, and import them from here; none imports another.

Pure: no I/O, no clock. It escapes nothing (each renderer escapes for its own format) and
never makes a link of a paper's raw fields: only the checked URLs of an `ItemView` are.
A model's texts (`Digest.texts`) are untrusted plain text: they lose control and
bidi-override characters and are capped (`model_text`); they never become links.
"""

from __future__ import annotations

from bot.render.view.models import (
    SHORT_CHARS,
    SIMILAR_GROUP,
    TEXT_LENGTHS,
    CategoryView,
    GroupView,
    ItemView,
    Layout,
    LinkView,
    RuleName,
    TextLength,
    rule_name,
    rule_names,
    similar_group,
)
from bot.render.view.papers import asked_length, day_span, group_views, item_view
from bot.render.view.texts import (
    SIMILAR_TITLE_CHARS,
    SUMMARY_CHARS,
    TRANSLATED_TEXT_CHARS,
    TRANSLATED_TITLE_CHARS,
    TextsView,
    cut_like,
    digest_summaries_note,
    layout_of,
    model_text,
    ranking_note,
    shown_note,
    summaries_note,
    texts_note,
    texts_view,
)

__all__ = [
    "SHORT_CHARS",
    "SIMILAR_GROUP",
    "SIMILAR_TITLE_CHARS",
    "SUMMARY_CHARS",
    "TEXT_LENGTHS",
    "TRANSLATED_TEXT_CHARS",
    "TRANSLATED_TITLE_CHARS",
    "CategoryView",
    "GroupView",
    "ItemView",
    "Layout",
    "LinkView",
    "RuleName",
    "TextLength",
    "TextsView",
    "asked_length",
    "cut_like",
    "day_span",
    "digest_summaries_note",
    "group_views",
    "item_view",
    "layout_of",
    "model_text",
    "ranking_note",
    "rule_name",
    "rule_names",
    "shown_note",
    "similar_group",
    "summaries_note",
    "texts_note",
    "texts_view",
]
