"""A paper's block of an email (templates email/paper.html.j2 and email/paper.txt.j2),
rendered once for every email that shows the paper alike: the same highlights, rules,
layout and days, with or without 👍 / 👎 links. Only its number and its vote links differ
from one email to the next; they are rendered as placeholders and filled in per email
(`paper_block`). A day's digests show the same papers to many subscribers, so most blocks
are made once (bench/fanout.py). Pure: no I/O, the shared Jinja2 environment.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from markupsafe import escape

from bot.render import template_env
from bot.render.view import ItemView, Layout, RuleName


class Votes(Protocol):
    """A paper's 👍 / 👎 links (bot.render.email.VoteLinks)."""

    @property
    def like(self) -> str: ...

    @property
    def dislike(self) -> str: ...


@dataclass(frozen=True, slots=True)
class _Votes:
    like: str
    dislike: str


# A paper looks the same in every digest that shows it alike (`shared_block`), but for
# its number and its 👍 / 👎 links: rendered once with these placeholders, filled in per
# email. Private-use characters: no paper text is taken for one (a block whose text holds
# one anyway is rendered for its email alone). The number's is two columns wide, as a
# number below 100 with its period is: the title's first line wraps the same.
_NUMBER = "\ue000\ue001"
_LIKE = "\ue002"
_DISLIKE = "\ue003"


def paper_block(
    kind: str,
    item: ItemView,
    rule: RuleName,
    layout: Layout,
    many_days: bool,
    feedback: Mapping[str, Votes],
    *,
    inlining: Inlining | None = None,
) -> str:
    """A paper's block of an email's `kind` part ("html", "txt"): the template
    email/paper.KIND.j2, rendered once for the digests that show the paper alike.
    `inlining`: the email's CSS, inlined into an HTML block once per shared block (not
    once per email), before its number and votes are filled in."""
    votes = feedback.get(item.paper.id)
    number = item.number
    if kind == "html" or (isinstance(number, int) and number < 100):
        # The placeholder stands where the number goes: only the templates read it.
        placeholder = item.numbered_alike(_NUMBER)
        block = shared_block(
            kind, placeholder, rule, layout, many_days, votes is not None, inlining
        )
        if block is not None:
            if kind == "txt":
                block = block.replace(f"{_NUMBER}. ", f"{number}.".ljust(3) + " ", 1)
            else:
                block = block.replace(_NUMBER, str(number), 1)
            if votes is not None:
                like, dislike = votes.like, votes.dislike
                if kind == "html":
                    like, dislike = str(escape(like)), str(escape(dislike))
                block = block.replace(_LIKE, like, 1).replace(_DISLIKE, dislike, 1)
            return block
    block = _render_block(kind, item, rule, layout, many_days, feedback)
    return inlining.inline(block, inlining.css) if inlining is not None else block


@dataclass(frozen=True, slots=True)
class Inlining:
    """An email's stylesheet (`css`) and how it is inlined into an HTML fragment
    (`inline(html, css)`): part of a shared block's key, so keep one per stylesheet."""

    css: str
    inline: Callable[[str, str], str]


# 16,384 blocks (about 40 MB): the distinct blocks of a day's 10,000 digests all fit.
@functools.lru_cache(maxsize=16384)
def shared_block(
    kind: str,
    item: ItemView,
    rule: RuleName,
    layout: Layout,
    many_days: bool,
    votes: bool,
    inlining: Inlining | None = None,
) -> str | None:
    """The block of a paper numbered `_NUMBER`, with placeholder 👍 / 👎 links if `votes`,
    its CSS inlined by `inlining`; None when its text holds a placeholder of its own (it
    is rendered alone)."""
    marks = {item.paper.id: _Votes(like=_LIKE, dislike=_DISLIKE)} if votes else {}
    block = _render_block(kind, item, rule, layout, many_days, marks)
    if inlining is not None:
        block = inlining.inline(block, inlining.css)
    once = 1 if votes else 0
    if (block.count(_NUMBER), block.count(_LIKE), block.count(_DISLIKE)) != (1, once, once):
        return None
    return block


def _render_block(
    kind: str,
    item: ItemView,
    rule: RuleName,
    layout: Layout,
    many_days: bool,
    feedback: Mapping[str, Votes],
) -> str:
    return (
        template_env()
        .get_template(f"email/paper.{kind}.j2")
        .render(
            item=item,
            group=_Filed(rule),
            layout=layout,
            many_days=many_days,
            feedback=feedback,
        )
    )


@dataclass(frozen=True, slots=True)
class _Filed:
    """What a paper's block knows of its group: the rule it is filed under."""

    rule: RuleName
