"""The slash command's syntax: its words (a rule keeps its quotes), a channel named as the
first argument, the rule text and the label after it (`RULE as LABEL`), a rule error shown
as Slack shows code, and the usage text.

Text in, text out: it looks nothing up and does nothing (that is `bot.slack.commands`).
"""

from __future__ import annotations

import re

from bot.core.errors import RuleError
from bot.render.mrkdwn import escape_mrkdwn

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


# Quotes the rule language reads as a phrase's (`bot.rules`): an "as" between them is text.
_QUOTES = frozenset('"\u201c\u201d\u201e')
_LABEL_WORD = "as"


def split_label(text: str) -> tuple[str, str | None]:
    """A rule and the label after it: `marl OR "multi-agent RL" as multi-agent RL` is the rule
    `marl OR "multi-agent RL"` and the label `multi-agent RL` (its quotes, if any, dropped).
    The first `as` (any case) outside quotes and parentheses, between words, is the one, so a
    label may hold the word too; a rule that searches it quotes it: `"learning as inference"`.
    No such `as`: no label."""
    depth, quoted = 0, False
    for index, char in enumerate(text):
        if char in _QUOTES:
            quoted = not quoted
        elif quoted:
            continue
        elif char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif (
            depth == 0
            and text[index : index + 2].lower() == _LABEL_WORD
            and index > 0
            and text[index - 1].isspace()
            and text[index + 2 : index + 3].isspace()
        ):
            rule, label = text[:index].strip(), text[index + 2 :].strip()
            if not rule or not label:
                break
            if len(label) >= 2 and label[0] in _QUOTES and label[-1] in _QUOTES:
                label = label[1:-1]
            return rule, label
    return text.strip(), None


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
        f"• `{c} subscribe RULE as LABEL` (the digests show the label in place of the rule)",
        f"• `{c} subscribe #channel RULE` (for a channel: admins and channel managers)",
        f"• `{c} list`, `{c} remove N`, `{c} label N LABEL|off`, `{c} pause`, `{c} resume`",
        f"• `{c} summaries on|off` (a short summary in place of each abstract)",
        f"• `{c} language zh|off` (each title and abstract in a language beside the English)",
        f"• `{c} try RULE` (what it would have found lately)",
        f"• `{c} like 2411.18179`, `{c} dislike ID`, `{c} unlike ID`, `{c} likes` "
        "(papers like the ones you like are added to your digests)",
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
