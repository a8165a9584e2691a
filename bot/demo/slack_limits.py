"""Slack's limits on one message, checked the way Slack checks them, for the Slack stand-in.

`check_message` returns a message's text and blocks once checked: a breach Slack refuses is
recorded and raised (`Rejected`, with the error Slack answers); one Slack lets through
(an unescaped `&` in mrkdwn, blocks without a text fallback) is recorded only.
`mrkdwn_problems` says what in a mrkdwn text is not escaped the way Slack wants. Block Kit
blocks are validated with slack_sdk's models; nothing here talks to Slack.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

from slack_sdk.models.blocks import Block

# Slack's limits on one message.
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_SECTION_FIELD = 2000
MAX_HEADER_TEXT = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_BLOCKS_TEXT = 13_000  # all the text in the blocks: past it Slack answers msg_too_long
MAX_TEXT = 40_000

# What may follow a `<` in mrkdwn: a link, a user/channel mention or a special command.
_ANGLE = re.compile(
    r"<(?:(?:https?://|mailto:)[^<>|\s]+|@[UW][A-Z0-9]+|#C[A-Z0-9]+|![a-z]+(?:\^[^<>|]*)?)"
    r"(?:\|(?P<label>[^<>]*))?>"
)
_ENTITY = re.compile(r"&(?:amp|lt|gt);")


class Rejected(Exception):
    """A call Slack would refuse, with the error it answers (shared with the stand-in's
    API methods)."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


def mrkdwn_problems(text: str) -> list[str]:
    """What in a mrkdwn text is not escaped the way Slack wants (`&`, `<` and `>` as entities,
    `<` only to open a link, a mention or a special command)."""
    problems = []
    labels = " ".join(m.group("label") or "" for m in _ANGLE.finditer(text))
    rest = _ANGLE.sub(" ", text) + " " + labels
    if "<" in rest:
        at = rest.index("<")
        problems.append(f"a raw '<' that opens no link or mention: {rest[at : at + 30]!r}")
    bare = _ENTITY.sub("", rest)
    if "&" in bare:
        at = bare.index("&")
        problems.append(f"a raw '&' (not &amp; &lt; &gt;): {bare[max(0, at - 10) : at + 20]!r}")
    return problems


def _texts(value: Any) -> list[str]:
    """Every string under a "text" key, anywhere in a JSON value."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "text" and isinstance(item, str):
                found.append(item)
            else:
                found.extend(_texts(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_texts(item))
    return found


def _mrkdwn_texts(value: Any) -> list[str]:
    """The texts of every mrkdwn text object, anywhere in a JSON value."""
    found: list[str] = []
    if isinstance(value, dict):
        if value.get("type") == "mrkdwn" and isinstance(value.get("text"), str):
            found.append(value["text"])
        for item in value.values():
            found.extend(_mrkdwn_texts(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_mrkdwn_texts(item))
    return found


def check_message(
    where: str, args: dict[str, Any], violations: list[str]
) -> tuple[str, list[Any] | None]:
    """The message's text and blocks, once checked against Slack's limits: a breach
    Slack refuses is recorded in `violations` (as "<where>: <what>") and raised; one Slack
    lets through is recorded only."""

    def violate(what: str) -> None:
        violations.append(f"{where}: {what}")

    text = args.get("text")
    text = "" if text is None else str(text)
    blocks: Any = args.get("blocks")
    if isinstance(blocks, str):  # a form post carries the blocks as JSON text
        try:
            blocks = json.loads(blocks) if blocks else None
        except ValueError:
            violate("blocks is not valid JSON (invalid_blocks)")
            raise Rejected("invalid_blocks") from None
    if blocks is not None and not isinstance(blocks, list):
        violate("blocks is not a list (invalid_blocks)")
        raise Rejected("invalid_blocks")
    if not text and not blocks and not args.get("attachments"):
        raise Rejected("no_text")
    if len(text) > MAX_TEXT:
        violate(f"text is {len(text)} characters, over {MAX_TEXT} (msg_too_long)")
        raise Rejected("msg_too_long")
    if blocks:
        _check_blocks(blocks, violate)
        if not text:
            violate("blocks without a top-level text fallback (Slack warns: notifications)")
    mrkdwn = [text] if text and args.get("mrkdwn") not in (False, "false", "0") else []
    for each in mrkdwn + _mrkdwn_texts(blocks or []):
        for problem in mrkdwn_problems(each):
            violate(f"unescaped mrkdwn, {problem}")
    return text, blocks


def _check_blocks(blocks: list[Any], violate: Callable[[str], None]) -> None:
    problems: list[str] = []
    if len(blocks) > MAX_BLOCKS:
        problems.append(f"{len(blocks)} blocks, Slack allows at most {MAX_BLOCKS}")
    block_ids: set[str] = set()
    for index, block in enumerate(blocks):
        problems.extend(f"block {index}: {p}" for p in _block_problems(block, block_ids))
    if problems:
        for problem in problems:
            violate(f"{problem} (invalid_blocks)")
        raise Rejected("invalid_blocks")
    total = sum(len(t) for t in _texts(blocks))
    if total > MAX_BLOCKS_TEXT:
        violate(
            f"the blocks hold {total} characters of text, over {MAX_BLOCKS_TEXT} (msg_too_long)",
        )
        raise Rejected("msg_too_long")


def _block_problems(block: Any, block_ids: set[str]) -> list[str]:
    if not isinstance(block, dict):
        return [f"not an object: {block!r:.60}"]
    kind = block.get("type")
    problems: list[str] = []
    block_id = block.get("block_id")
    if isinstance(block_id, str):
        if block_id in block_ids:
            problems.append(f"block_id {block_id!r} used twice")
        block_ids.add(block_id)
    if kind == "section":
        text = block.get("text")
        if text is not None and not isinstance(text, dict):
            problems.append("section text must be a text object, not a bare string")
        elif isinstance(text, dict) and len(str(text.get("text", ""))) > MAX_SECTION_TEXT:
            problems.append(
                f"section text is {len(str(text.get('text')))} characters, over {MAX_SECTION_TEXT}"
            )
        for number, field in enumerate(block.get("fields") or []):
            if not isinstance(field, dict):
                problems.append(f"section field {number} must be a text object")
            elif len(str(field.get("text", ""))) > MAX_SECTION_FIELD:
                problems.append(
                    f"section field {number} is {len(str(field.get('text')))} characters,"
                    f" over {MAX_SECTION_FIELD}"
                )
    elif kind == "header":
        text = block.get("text")
        if not isinstance(text, dict) or text.get("type") != "plain_text":
            problems.append("header text must be a plain_text object")
        elif len(str(text.get("text", ""))) > MAX_HEADER_TEXT:
            problems.append(
                f"header text is {len(str(text.get('text')))} characters, over {MAX_HEADER_TEXT}"
            )
    elif kind == "context":
        elements = block.get("elements") or []
        if len(elements) > MAX_CONTEXT_ELEMENTS:
            problems.append(f"context has {len(elements)} elements, over {MAX_CONTEXT_ELEMENTS}")
    if problems:
        return problems  # slack_sdk's validators would say the same again
    try:
        parsed = Block.parse(copy.deepcopy(block))
        if parsed is None:
            problems.append(f"slack_sdk does not know a block of type {kind!r}")
        else:
            unknown = set(block) - parsed.attributes - {"type"}
            if unknown:
                problems.append(f"{kind} block has unknown fields {sorted(unknown)}")
            parsed.validate_json()
    except Exception as error:  # slack_sdk raises SlackObjectFormationError, or worse
        problems.append(f"slack_sdk rejects the {kind} block: {error}")
    return problems
