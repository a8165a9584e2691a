"""A stand-in of the Slack Web API for the demo and the tests: not a Slack.

`SlackStandIn` serves, on loopback, the few Web API methods paperbell calls (`auth.test`,
`chat.postMessage`, `users.info`, `conversations.info`, `conversations.open`,
`conversations.list`, `conversations.history`, `conversations.replies`,
`apps.connections.open`), incoming webhooks and `response_url`s. It answers the way Slack
answers (HTTP 200 with `{"ok": false, "error": ...}` for API errors, plain text for webhooks),
checks every message against Slack's limits (`bot.demo.slack_limits`), and records what it
was sent. It keeps the workspace's state (channels, users, messages) and answers each
request; `bot.demo.loopback` serves it from a daemon thread. The real slack_sdk clients are
pointed at it with `base_url`.

What it does not do: real-time events, files, edits, reactions, rate limits of its own
(they are scripted with `fail_next`; a late answer or a dropped connection with
`answer_late`), pagination, or any formatting of the messages it keeps.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from bot.demo.loopback import Answer, LoopbackServer
from bot.demo.slack_limits import Rejected, check_message

BOT_USER_ID = "UBOT"
BOT_ID = "BSTANDIN"
TEAM_ID = "T0STANDIN"
TEAM_NAME = "paperbell stand-in"

_FIRST_TS = 1_764_000_000_000_000  # microseconds; ts strings look like "1764000000.000100"
FIRST_TS = _FIRST_TS / 1_000_000  # the first message's time: the clock of a test that reads back


@dataclass
class SlackRequest:
    """One request the stand-in received, and what it answered."""

    method: str  # "chat.postMessage", ... or "webhook:<name>", "response:<id>"
    args: dict[str, Any]  # query params, form fields and JSON body, merged
    headers: dict[str, str]
    at: float  # time.monotonic() when received
    status: int  # the HTTP status answered
    response: dict[str, Any] | str


@dataclass
class _Fault:
    status: int
    error: str | None
    retry_after: int | None


@dataclass
class _Late:
    delay: float
    hang_up: bool


@dataclass
class _Channel:
    id: str
    name: str
    member: bool = True
    is_private: bool = False
    user: str | None = None  # the other party of a DM


def _flag(value: Any) -> bool | None:
    """A boolean argument, sent as JSON true/false or as a form "true"/"1"."""
    if value is None or isinstance(value, bool):
        return value
    return str(value).lower() in {"true", "1"}


class SlackStandIn:
    """The stand-in: `start()` it (or use it as a context manager), add channels and users,
    point slack_sdk at `base_url`, then read `messages()`, `requests` and `violations`."""

    def __init__(self, *, token: str = "xoxb-standin", app_token: str = "xapp-standin") -> None:
        self.token = token
        self.app_token = app_token
        self.socket_url: str | None = None
        self.requests: list[SlackRequest] = []
        self.violations: list[str] = []
        self.responses: list[dict[str, Any]] = []  # what was POSTed to response URLs
        self._messages: list[dict[str, Any]] = []
        self._channels: dict[str, _Channel] = {}
        self._users: dict[str, dict[str, Any]] = {}
        self._webhooks: dict[str, str] = {}  # name -> channel id
        self._faults: dict[str, list[_Fault]] = {}
        self._late: dict[str, list[_Late]] = {}
        self._posted = 0
        self._lock = threading.RLock()
        self._http = LoopbackServer(self._receive, name="slack-standin", version="SlackStandIn/1")

    # ---- lifecycle -------------------------------------------------------------------

    def start(self) -> SlackStandIn:
        self._http.start()
        return self

    def stop(self) -> None:
        self._http.stop()

    def __enter__(self) -> SlackStandIn:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def root_url(self) -> str:
        if not self._http.started:
            raise RuntimeError("the Slack stand-in is not started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The Web API's base URL, as slack_sdk's `base_url` wants it (trailing slash)."""
        return f"{self.root_url}/api/"

    # ---- the workspace ---------------------------------------------------------------

    def add_channel(
        self, id: str, name: str, *, member: bool = True, is_private: bool = False
    ) -> None:
        with self._lock:
            self._channels[id] = _Channel(id, name.lstrip("#"), member, is_private)

    def add_user(
        self,
        id: str,
        name: str,
        *,
        email: str | None = None,
        real_name: str = "",
        is_admin: bool = False,
        is_owner: bool = False,
        tz: str = "UTC",
    ) -> None:
        profile: dict[str, Any] = {"real_name": real_name, "display_name": name}
        if email is not None:
            profile["email"] = email
        user = {
            "id": id,
            "team_id": TEAM_ID,
            "name": name,
            "real_name": real_name,
            "tz": tz,
            "is_admin": is_admin,
            "is_owner": is_owner,
            "is_bot": False,
            "deleted": False,
            "profile": profile,
        }
        with self._lock:
            self._users[id] = user

    def add_webhook(self, name: str, channel_id: str) -> str:
        """An incoming webhook that posts into `channel_id`; returns its URL."""
        with self._lock:
            self._webhooks[name] = channel_id
        return self.webhook_url(name)

    def webhook_url(self, name: str) -> str:
        return f"{self.root_url}/webhook/{name}"

    def response_url(self, id: str) -> str:
        return f"{self.root_url}/response/{id}"

    def fail_next(
        self,
        method: str,
        *,
        error: str | None = None,
        status: int = 200,
        retry_after: int | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next `times` calls of `method` with a fault, before any other handling.

        `retry_after` gives HTTP 429 with a Retry-After header and error "ratelimited";
        `status` 500/503 gives that status; `error` alone gives HTTP 200 `{"ok": false}`.
        `method` may also be "webhook:<name>" or "response:<id>" (an error there is HTTP 400
        with the error as plain text, as Slack's webhooks answer)."""
        if retry_after is not None and status == 200:
            status = 429
        if status == 200 and error is None:
            raise ValueError("fail_next needs an error, a status or a retry_after")
        with self._lock:
            faults = self._faults.setdefault(method, [])
            faults.extend(_Fault(status, error, retry_after) for _ in range(times))

    def answer_late(
        self, method: str, *, delay: float = 0.0, hang_up: bool = False, times: int = 1
    ) -> None:
        """Handle the next `times` calls of `method` as usual (a post is kept), then answer
        only after `delay` seconds, or close the connection with no answer (`hang_up`): what
        a client sees when Slack took its request but the answer never came."""
        with self._lock:
            self._late.setdefault(method, []).extend(_Late(delay, hang_up) for _ in range(times))

    # ---- what was received -----------------------------------------------------------

    def messages(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Accepted messages (chat.postMessage and webhooks), in order; of one channel if given
        (an id, or a name with or without '#')."""
        with self._lock:
            if channel is not None and channel not in self._channels:
                found = self._find_channel(channel)
                channel = found.id if found is not None else channel
            return [copy.deepcopy(m) for m in self._messages if channel in (None, m["channel"])]

    def thread(self, ts: str) -> list[dict[str, Any]]:
        """The replies in the thread of the message `ts`, in order."""
        with self._lock:
            return [copy.deepcopy(m) for m in self._messages if m.get("thread_ts") == ts]

    def save_json(self, path: Path) -> None:
        """What was posted: channels, messages (webhook posts included), responses, violations."""
        with self._lock:
            data = {
                "channels": {c.id: c.name for c in self._channels.values()},
                "messages": self._messages,
                "responses": self.responses,
                "violations": self.violations,
            }
            text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        Path(path).write_text(text, encoding="utf-8")

    # ---- HTTP ------------------------------------------------------------------------

    def _receive(self, path: str, headers: dict[str, str], body: bytes) -> Answer:
        at = time.monotonic()
        url = urlsplit(path)
        args: dict[str, Any] = dict(parse_qsl(url.query, keep_blank_values=True))
        parts = url.path.strip("/").split("/", 1)
        kind, name = (parts[0], parts[1]) if len(parts) == 2 else (parts[0], "")
        method = {"api": name, "webhook": f"webhook:{name}", "response": f"response:{name}"}.get(
            kind, url.path
        )
        content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
        bad_body = None
        if body:
            if "json" in content_type:
                try:
                    parsed = json.loads(body)
                except ValueError:
                    bad_body = "invalid_json"
                else:
                    if isinstance(parsed, dict):
                        args.update(parsed)
                    elif parsed is not None:  # slack_sdk's webhook client sends {} as null
                        bad_body = "invalid_json"
            elif "x-www-form-urlencoded" in content_type:
                args.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
            else:
                bad_body = "invalid_form_data"
        with self._lock:
            answer = self._answer(kind, name, method, args, headers, bad_body)
            self.requests.append(
                SlackRequest(method, args, headers, at, answer.status, answer.body)
            )
            late = self._late.get(method)
            if late:
                fault = late.pop(0)
                answer = replace(answer, delay=fault.delay, hang_up=fault.hang_up)
        return answer

    def _answer(
        self,
        kind: str,
        name: str,
        method: str,
        args: dict[str, Any],
        headers: dict[str, str],
        bad_body: str | None,
    ) -> Answer:
        faults = self._faults.get(method)
        if faults:
            return self._fault_answer(kind, faults.pop(0))
        if kind == "api":
            if bad_body is not None:
                return Answer(200, {"ok": False, "error": bad_body}, {})
            return self._api(method, args, headers)
        if kind in ("webhook", "response"):
            if bad_body is not None:
                return Answer(400, "invalid_payload", {})
            if kind == "webhook":
                return self._webhook(name, args)
            return self._response(name, args)
        return Answer(404, "not_found", {})

    @staticmethod
    def _fault_answer(kind: str, fault: _Fault) -> Answer:
        extra = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
        default = {429: "ratelimited", 503: "service_unavailable"}.get(fault.status, "fatal_error")
        error = fault.error or default
        if kind == "api":
            return Answer(fault.status, {"ok": False, "error": error}, extra)
        status = 400 if fault.status == 200 else fault.status
        return Answer(status, "rate_limited" if status == 429 else error, extra)

    # ---- the Web API -----------------------------------------------------------------

    def _api(self, method: str, args: dict[str, Any], headers: dict[str, str]) -> Answer:
        handler = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "users.info": self._users_info,
            "conversations.info": self._conversations_info,
            "conversations.open": self._conversations_open,
            "conversations.list": self._conversations_list,
            "conversations.history": self._conversations_history,
            "conversations.replies": self._conversations_replies,
            "apps.connections.open": self._connections_open,
        }.get(method)
        if handler is None:
            return Answer(200, {"ok": False, "error": "unknown_method"}, {})
        error = self._auth_error(method, args, headers)
        if error is not None:
            return Answer(200, {"ok": False, "error": error}, {})
        try:
            result = handler(args)
        except Rejected as rejected:
            return Answer(200, {"ok": False, "error": rejected.error}, {})
        return Answer(200, {"ok": True, **result}, {})

    def _auth_error(self, method: str, args: dict[str, Any], headers: dict[str, str]) -> str | None:
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
        token = token or str(args.get("token") or "")
        if not token:
            return "not_authed"
        app_method = method == "apps.connections.open"
        wanted, other = (self.app_token, self.token) if app_method else (self.token, self.app_token)
        if token == wanted:
            return None
        return "not_allowed_token_type" if token == other else "invalid_auth"

    def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": f"{self.root_url}/",
            "team": TEAM_NAME,
            "user": "paperbell",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
        }

    def _users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = self._users.get(str(args.get("user", "")))
        if user is None:
            raise Rejected("user_not_found")
        return {"user": copy.deepcopy(user)}

    def _conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channels.get(str(args.get("channel", "")))
        if channel is None:
            raise Rejected("channel_not_found")
        return {"channel": self._channel_json(channel)}

    def _conversations_open(self, args: dict[str, Any]) -> dict[str, Any]:
        users = [u for u in str(args.get("users", "")).split(",") if u]
        if not users:
            raise Rejected("users_list_not_supplied")
        if len(users) > 1:
            raise Rejected("not_supported_by_standin")  # group DMs are not stood in for
        channel = self._dm(users[0])
        if channel is None:
            raise Rejected("user_not_found")
        return {"channel": {"id": channel.id}}

    def _conversations_list(self, args: dict[str, Any]) -> dict[str, Any]:
        """Every channel that is not a direct message, on one page."""
        found = [self._channel_json(c) for c in self._channels.values() if c.user is None]
        return {"channels": found, "response_metadata": {"next_cursor": ""}}

    def _conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        """The channel's top-level messages in the window, newest first."""
        channel = self._readable(args)
        tops = [m for m in self._messages if m["channel"] == channel.id and not m["thread_ts"]]
        return self._page(list(reversed(tops)), args)

    def _conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        """A thread, its parent first, in the window."""
        channel = self._readable(args)
        ts = str(args.get("ts") or "")
        thread = [
            m
            for m in self._messages
            if m["channel"] == channel.id and ts in (m["ts"], m["thread_ts"])
        ]
        if not thread:
            raise Rejected("thread_not_found")
        return self._page(thread, args)

    def _readable(self, args: dict[str, Any]) -> _Channel:
        # As Slack does: a conversation id only (no "#name", no user id), and only where
        # the bot is a member.
        channel = self._channels.get(str(args.get("channel") or ""))
        if channel is None:
            raise Rejected("channel_not_found")
        if not channel.member:
            raise Rejected("not_in_channel")
        return channel

    def _page(self, messages: list[dict[str, Any]], args: dict[str, Any]) -> dict[str, Any]:
        oldest = float(args.get("oldest") or 0)
        latest = float(args.get("latest") or "inf")
        inclusive = bool(_flag(args.get("inclusive")))
        metadata = bool(_flag(args.get("include_all_metadata")))
        limit = int(args.get("limit") or 100)
        inside = [
            m
            for m in messages
            if (oldest <= float(m["ts"]) <= latest)
            if inclusive or float(m["ts"]) not in (oldest, latest)
        ]
        shown = [self._shown(m, metadata=metadata) for m in inside[:limit]]
        return {"messages": shown, "has_more": len(inside) > limit}

    @staticmethod
    def _shown(message: dict[str, Any], *, metadata: bool) -> dict[str, Any]:
        """A kept message as the Web API shows it (its metadata only when asked for)."""
        shown = {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "text": message["text"],
            "ts": message["ts"],
        }
        if message["blocks"]:
            shown["blocks"] = copy.deepcopy(message["blocks"])
        if message["thread_ts"]:
            shown["thread_ts"] = message["thread_ts"]
        if metadata and message.get("metadata"):
            shown["metadata"] = copy.deepcopy(message["metadata"])
        return shown

    def _connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        if self.socket_url is None:
            raise Rejected("standin_socket_url_not_set")
        return {"url": self.socket_url}

    @staticmethod
    def _channel_json(channel: _Channel) -> dict[str, Any]:
        is_im = channel.user is not None
        found: dict[str, Any] = {
            "id": channel.id,
            "name": channel.name,
            "is_channel": not is_im and not channel.is_private,
            "is_group": not is_im and channel.is_private,
            "is_im": is_im,
            "is_private": channel.is_private or is_im,
            "is_member": channel.member,
        }
        if is_im:
            found["user"] = channel.user
        return found

    def _dm(self, user: str) -> _Channel | None:
        if user not in self._users:
            return None
        channel_id = "D" + user
        if channel_id not in self._channels:
            self._channels[channel_id] = _Channel(channel_id, user, True, True, user)
        return self._channels[channel_id]

    def _find_channel(self, ref: str) -> _Channel | None:
        if ref in self._channels:
            return self._channels[ref]
        if ref[:1] in ("U", "W") and ref in self._users:
            return self._dm(ref)
        name = ref.removeprefix("#")
        return next((c for c in self._channels.values() if c.name == name and not c.user), None)

    def _post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._find_channel(str(args.get("channel") or ""))
        if channel is None:
            raise Rejected("channel_not_found")
        if not channel.member:
            raise Rejected("not_in_channel")
        thread_ts = args.get("thread_ts") or None
        if thread_ts is not None:
            thread_ts = str(thread_ts)
            parent = next(
                (
                    m
                    for m in self._messages
                    if m["ts"] == thread_ts and m["channel"] == channel.id and not m["thread_ts"]
                ),
                None,
            )
            if parent is None:
                raise Rejected("thread_not_found")
        where = f"chat.postMessage to {channel.id} (#{channel.name})"
        text, blocks = check_message(where, args, self.violations)
        message = self._keep(channel, args, text, blocks, thread_ts, "chat.postMessage")
        metadata = args.get("metadata")
        if isinstance(metadata, str):  # a form field carries it as JSON
            metadata = json.loads(metadata)
        if metadata:
            message["metadata"] = copy.deepcopy(metadata)
        shown = self._shown(message, metadata=True)
        return {"channel": channel.id, "ts": message["ts"], "message": shown}

    def _keep(
        self,
        channel: _Channel,
        args: dict[str, Any],
        text: str,
        blocks: list[Any] | None,
        thread_ts: str | None,
        via: str,
    ) -> dict[str, Any]:
        self._posted += 1
        micro = _FIRST_TS + 100 * self._posted
        message: dict[str, Any] = {
            "channel": channel.id,
            "ts": f"{micro // 1_000_000}.{micro % 1_000_000:06d}",
            "thread_ts": thread_ts,
            "text": text,
            "blocks": copy.deepcopy(blocks),
            "unfurl_links": _flag(args.get("unfurl_links")),
            "unfurl_media": _flag(args.get("unfurl_media")),
            "via": via,
        }
        if channel.user is not None:
            message["user"] = channel.user
        self._messages.append(message)
        return message

    # ---- incoming webhooks and response URLs -----------------------------------------

    def _webhook(self, name: str, args: dict[str, Any]) -> Answer:
        channel_id = self._webhooks.get(name)
        channel = self._channels.get(channel_id or "")
        if channel is None:
            return Answer(404, "no_service", {})
        try:
            text, blocks = check_message(f"webhook {name} to {channel.id}", args, self.violations)
        except Rejected as rejected:
            return Answer(400, rejected.error, {})
        self._keep(channel, args, text, blocks, None, f"webhook:{name}")
        return Answer(200, "ok", {})

    def _response(self, id: str, args: dict[str, Any]) -> Answer:
        try:
            text, blocks = check_message(f"response_url {id}", args, self.violations)
        except Rejected as rejected:
            return Answer(400, rejected.error, {})
        self.responses.append({"id": id, **copy.deepcopy(args), "text": text, "blocks": blocks})
        return Answer(200, "ok", {})
