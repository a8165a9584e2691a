"""What passes between Slack and the command logic: the request (a slash command as Slack
sends it), the reply, and who a user is and what a channel is, as the `Directory` says.

Plain data and one protocol: no HTTP, no Slack client (`bot.slack.app` fills them in from
Slack's form posts and Web API), no store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class CommandRequest:
    """What Slack sends with a slash command (the fields paperbell reads)."""

    text: str
    user_id: str
    user_name: str = ""
    channel_id: str = ""
    channel_name: str = ""
    team_id: str = ""
    command: str = "/papers"
    response_url: str | None = None

    @classmethod
    def from_form(cls, form: dict[str, str]) -> CommandRequest:
        """From the fields of Slack's form post (or a Socket Mode payload)."""
        return cls(
            text=form.get("text", ""),
            user_id=form.get("user_id", ""),
            user_name=form.get("user_name", ""),
            channel_id=form.get("channel_id", ""),
            channel_name=form.get("channel_name", ""),
            team_id=form.get("team_id", ""),
            command=form.get("command", "/papers"),
            response_url=form.get("response_url") or None,
        )


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer: ephemeral (only the user sees it) unless it concerns a channel."""

    text: str
    public: bool = False

    def to_slack(self) -> dict[str, Any]:
        return {
            "response_type": "in_channel" if self.public else "ephemeral",
            "text": self.text,
        }


@dataclass(frozen=True, slots=True)
class SlackUser:
    id: str
    name: str  # the handle
    real_name: str = ""
    email: str | None = None  # only with the users:read.email scope
    is_admin: bool = False  # a workspace admin or owner
    tz: str | None = None


@dataclass(frozen=True, slots=True)
class SlackChannelInfo:
    id: str
    name: str
    is_member: bool = True  # whether the bot is in it
    is_private: bool = False

    @property
    def keys(self) -> tuple[str, str]:
        """How a subscriber may name this channel: its id, or "#name" (in the config)."""
        return (self.id, f"#{self.name}")


class Directory(Protocol):
    """Who a Slack user is, what a channel is (users.info, conversations.info)."""

    async def user(self, user_id: str) -> SlackUser | None: ...

    async def channel(self, channel_id: str) -> SlackChannelInfo | None: ...


SendNow = Callable[[str], Awaitable[list[Any]]]  # subscriber name -> delivery reports
