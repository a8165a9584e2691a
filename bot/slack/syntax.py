"""The slash command's syntax: its words (a rule keeps its quotes), a channel named as the
first argument, the rule text, a rule error shown as Slack shows code, and the usage text.

Text in, text out: it looks nothing up and does nothing (that is `bot.slack.commands`).
"""

from __future__ import annotations

import re

from bot.core.errors import RuleError
from bot.render.slack import escape_mrkdwn

# `<#C0123|name>` (Slack escapes channels so when the manifest says should_escape), or #name.
CHANNEL_RE = re.compile(
    r"^(?:<#(?P<id>[CG][A-Z0-9]+)(?:\|(?P<label>[^>]*))?>|#(?P<name>[a-z0-9_\-]+))$"
)


def split_words(text: str) -> list[str]:
    """The command's words; a rule's quotes stay in it (`"diffusion policy" robot`)."""
    text = text.replace("“", '"').replace("”", '"')  # Slack's smart quotes
    words = text.split(None, 2)
    if not words:
        return []
    if len(words) >= 2 and CHANNEL_RE.match(words[1]):
        return words  # verb, channel, rule
    return [words[0], *(text.split(None, 1)[1:])]


def rule_text(args: list[str]) -> str:
    return " ".join(args).strip()


def rule_error(exc: RuleError) -> str:
    """The rule error, with a caret under the column, as Slack shows code."""
    caret = escape_mrkdwn(exc.caret())
    reason = escape_mrkdwn(exc.reason)
    return (
        f":warning: That rule does not parse: {reason} at column {exc.position + 1}:\n```{caret}```"
    )


def usage(command: str, *, full: bool = False) -> str:
    """What the command does, subcommand by subcommand; `full` adds the rules' syntax."""
    c = command
    lines = [
        f"*{c}* keeps you posted on new papers:",
        f'• `{c} subscribe "diffusion policy" cat:cs.RO` (a rule for you)',
        f"• `{c} subscribe #channel RULE` (for a channel: admins and channel managers)",
        f"• `{c} list`, `{c} remove N`, `{c} pause`, `{c} resume`",
        f"• `{c} summaries on|off` (a short summary in place of each abstract)",
        f"• `{c} language zh|off` (each title and abstract in a language beside the English)",
        f"• `{c} try RULE` (what it would have found lately)",
        f"• `{c} digest` (your digest now)",
        f"• `{c} email [ADDRESS|off]` (digests by email too, once you confirm the address)",
        f"• `{c} manage` (a private link to your settings page)",
    ]
    if full:
        lines.append(
            'Rules: words and "phrases", AND/OR/NOT (or -word), fields `ti:` `abs:` '
            "`au:` `cat:` `id:` `src:`, Hugging Face `upvotes>=20` `hf:top10`, "
            'e.g. `au:"Yann LeCun" OR ti:jepa`'
        )
    return "\n".join(lines)
