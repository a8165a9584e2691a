"""CSS inlined into an email's HTML part: most mail clients (Gmail for other accounts,
Outlook, Yahoo) ignore or strip <style>, so its rules are copied onto each element.

Owns the inliner and how a digest's HTML part is inlined (`html_part`): each paper's block
on its own, once for every email that shows it (bot.render.blocks caches it inlined), the
rest of the email apart. Pure: no I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping

import css_inline
from markupsafe import Markup

from bot.render import template_env
from bot.render.blocks import Inlining
from bot.render.view import GroupView, ItemView


@functools.cache
def _inliner() -> css_inline.CSSInliner:
    # The <style> block stays too: its @media rules (phones, dark mode) cannot be inlined.
    return css_inline.CSSInliner(
        keep_style_tags=True, load_remote_stylesheets=False, minify_css=True
    )


def inline_css(html: str) -> str:
    """Copy the rules of the HTML's <style> block onto each element's style attribute:
    most clients (Gmail for other accounts, Outlook, Yahoo) ignore or strip <style>."""
    return _inliner().inline(html)


# Where a paper's block goes in the HTML part while the rest is inlined: private-use
# characters, as the blocks' own placeholders (bot.render.blocks).
_PLACE, _PLACE_END = "\ue010", "\ue011"
_PLACE_RE = re.compile(f"{_PLACE}([0-9]+){_PLACE_END}")
_STYLESHEET_RE = re.compile(r"<style>(.*?)</style>", re.DOTALL)


def html_part(
    context: Mapping[str, object],
    block: Callable[[ItemView, GroupView, Inlining | None], str],
) -> str:
    """The HTML part, its CSS inlined. The same paper looks the same in many emails, so
    its block is inlined once (the stylesheet's rules that match inside a block depend on
    nothing around it: tags and classes of its own) and placed into the rest of the
    email, inlined apart: the result is what inlining the whole email gives."""
    env = template_env()
    placed: list[tuple[ItemView, GroupView]] = []

    def place(item: ItemView, group: GroupView) -> Markup:
        placed.append((item, group))
        return Markup(f"{_PLACE}{len(placed) - 1}{_PLACE_END}")

    frame = env.get_template("email/digest.html.j2").render(context, paper=place)
    stylesheet = _STYLESHEET_RE.search(frame)
    if stylesheet is None or not frame.count(_PLACE) == frame.count(_PLACE_END) == len(placed):
        # A paper's text holds such a character: the email is inlined whole.
        whole = env.get_template("email/digest.html.j2").render(
            context, paper=lambda item, group: Markup(block(item, group, None))
        )
        return inline_css(whole)
    css = stylesheet.group(1)
    inlining = _STYLESHEETS.get(css) or _STYLESHEETS.setdefault(css, Inlining(css, _inline))
    blocks = [block(item, group, inlining) for item, group in placed]
    return _PLACE_RE.sub(lambda m: blocks[int(m.group(1))], inline_css(frame))


# The emails' stylesheets, each with one `Inlining` (a few: one per script their fonts
# name): a shared block's cache key then hashes a string already hashed.
_STYLESHEETS: dict[str, Inlining] = {}


def _inline(html: str, css: str) -> str:
    """A fragment of HTML (a paper's block) with `css` inlined."""
    return _inliner().inline_fragment(html, css)
