"""The 👍 / 👎 buttons of a Slack digest: what Slack's interactivity request says
(`parse_actions`: the form field `payload`, JSON, read as hostile) and what a press does
(`ButtonAnswers.answer`: the verdict recorded, or taken back with Undo) and says back (an
ephemeral message with an Undo button, for `response_url`).

Plain logic, no HTTP: `bot.slack.app` checks the request's signature (as for the slash
command), calls `parse_actions` and `ButtonAnswers.answer`, and posts the answer to the
press's `response_url`. Whose verdict it is comes from the button's value alone, a token
signed by paperbell (`bot.core.links.LinkSigner.feedback_token`) that names the subscriber
(a channel subscriber: the channel's), the paper and the verdict: a forged or altered value
changes nothing, and nobody's verdict but the digest's subscriber's.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from bot.core.links import web_url
from bot.core.models import Verdict
from bot.manage import FeedbackLink, Manager, Refused
from bot.render.mrkdwn import link
from bot.render.slack import DISLIKE_ACTION, LIKE_ACTION, UNDO_ACTION
from bot.render.tex import letters
from bot.render.text import clip, tidy

__all__ = ["ButtonAnswers", "ButtonPress", "parse_actions"]

log = logging.getLogger(__name__)

ACTIONS = (LIKE_ACTION, DISLIKE_ACTION, UNDO_ACTION)
MAX_PAYLOAD = 512 * 1024  # characters of JSON: a press on a full thread message is ~60 KB
MAX_VALUE = 2000  # Slack's limit on a button's value
MAX_PRESSES = 5  # actions one request may carry (Slack sends one)
TITLE_CHARS = 200


@dataclass(frozen=True, slots=True)
class ButtonPress:
    """One press of one of paperbell's buttons."""

    action: str  # LIKE_ACTION, DISLIKE_ACTION or UNDO_ACTION
    value: str  # the button's value: a feedback token
    user_id: str  # who pressed it
    response_url: str | None  # where the answer goes


def parse_actions(payload: str) -> list[ButtonPress] | str:
    """The presses of paperbell's buttons in an interactivity request's `payload` field
    (other apps' or unknown actions are left out), or what is wrong with it."""
    if len(payload) > MAX_PAYLOAD:
        return "payload too large"
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
        return "payload is not JSON"
    if not isinstance(data, dict):
        return "payload is not a JSON object"
    if data.get("type") != "block_actions":
        return f"not a button press (type {str(data.get('type'))[:40]!r})"
    user = data.get("user")
    user_id = user.get("id") if isinstance(user, dict) else None
    if not isinstance(user_id, str) or not user_id or len(user_id) > 40:
        return "no user"
    response_url = data.get("response_url")
    url = response_url if isinstance(response_url, str) else None
    url = web_url(url, what="a button press's response_url") if url else None
    actions = data.get("actions")
    if not isinstance(actions, list):
        return "no actions"
    presses = []
    for action in actions[:MAX_PRESSES]:
        if not isinstance(action, dict):
            continue
        action_id, value = action.get("action_id"), action.get("value")
        if action_id not in ACTIONS or not isinstance(value, str) or len(value) > MAX_VALUE:
            continue
        presses.append(ButtonPress(str(action_id), value, user_id, url))
    return presses


def _title(manager: Manager, found: FeedbackLink) -> str:
    """The paper as the answer names it: its title linked to its page (escaped), else its
    key."""
    paper = manager.paper(found.paper)
    title = tidy(letters(paper.title)) if paper else ""
    if not title:
        earlier = manager.feedback_on(found.subscriber, found.paper)
        title = tidy(letters(earlier.title)) if earlier else ""
    shown = clip(title, TITLE_CHARS) if title else found.paper
    url = web_url(paper.abs_url, what=f"paper {found.paper[:80]}") if paper else None
    return link(url, shown)


SAID: dict[Verdict, str] = {
    "like": ":+1: Noted: you like {title}. Your digests will put papers like it first.",
    "dislike": ":-1: Noted: you do not like {title}. Your digests will put papers like it "
    "lower, and after a few such verdicts leave them out.",
}


class ButtonAnswers:
    """What a press of a 👍, 👎 or Undo button does, and the answer (a message for
    `response_url`: ephemeral, seen by the one who pressed)."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    def answer(self, press: ButtonPress) -> dict[str, Any]:
        """Record (or take back) the verdict the press's token names; the message to say so.
        Runs store queries: call it in a thread."""
        found = self.manager.open_feedback(press.value)
        if isinstance(found, Refused):
            log.warning("refused a Slack button press by %s: %s", press.user_id, found.reason)
            return _ephemeral(_REFUSED.get(found.reason, _REFUSED["forged"]))
        title = _title(self.manager, found)
        sub = found.subscriber
        if press.action == UNDO_ACTION:
            stands = self.manager.undo_feedback(sub, found.paper, found.verdict)
            log.info("%s took back %s on %s from Slack", sub.name, found.verdict, found.paper)
            if stands is None:
                return _ephemeral(f"Taken back: no verdict on {title}.", replace=True)
            mark = ":+1:" if stands.liked else ":-1:"  # the verdict the press had replaced
            return _ephemeral(f"Taken back: your {mark} on {title} stands.", replace=True)
        wanted: Verdict = "like" if press.action == LIKE_ACTION else "dislike"
        if wanted != found.verdict:  # a 👍 token under a 👎 button: not paperbell's
            return _ephemeral(_REFUSED["forged"])
        self.manager.record_feedback(sub, found.paper, found.verdict, via="slack")
        text = SAID[found.verdict].format(title=title)
        return _ephemeral(text, undo=press.value)


_REFUSED = {
    "forged": ":warning: That button is not one of paperbell's, it was changed on the way, or "
    "its subscription is gone: nothing was recorded.",
    "expired": ":warning: That button is too old to work: nothing was recorded.",
    "gone": ":warning: That digest's subscription has changed or is gone: nothing was recorded.",
}


def _ephemeral(text: str, *, undo: str | None = None, replace: bool = False) -> dict[str, Any]:
    """An answer for `response_url`: seen only by the one who pressed, under the digest
    (`replace`: in place of the earlier answer, as Undo's is), with an Undo button."""
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
    if undo is not None:
        blocks.append(
            {
                "type": "actions",
                "block_id": "paperbell-undo",
                "elements": [
                    {
                        "type": "button",
                        "action_id": UNDO_ACTION,
                        "text": {"type": "plain_text", "text": "Undo"},
                        "value": undo,
                    }
                ],
            }
        )
    return {
        "response_type": "ephemeral",
        "replace_original": replace,
        "text": text,
        "blocks": blocks,
    }
