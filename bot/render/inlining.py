"""CSS inlined into an email's HTML part: most mail clients (Gmail for other accounts,
Outlook, Yahoo) ignore or strip <style>, so its rules are copied onto each element.

Owns the inliner. Pure: no I/O (it never fetches a stylesheet).
"""

from __future__ import annotations

import css_inline


def inline_css(html: str) -> str:
    """Copy the rules of the HTML's <style> block onto each element's style attribute:
    most clients (Gmail for other accounts, Outlook, Yahoo) ignore or strip <style>. The
    <style> block stays too: its @media rules (phones, dark mode) cannot be inlined."""
    return css_inline.inline(
        html, keep_style_tags=True, load_remote_stylesheets=False, minify_css=True
    )
