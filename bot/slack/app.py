"""The Slack app's edges: the directory (users.info, conversations.info), acknowledge-first
answers with slow results sent to `response_url`, request signatures, the HTTP endpoints,
and Socket Mode.

Wiring only: the command logic is `bot.slack.commands`, the buttons' is `bot.slack.actions`;
`slack_routes` builds `POST /slack/commands` (checked by `RequestChecker`, answered by
`SlackResponder.answer`) and `POST /slack/actions` (the 👍 / 👎 buttons: Slack's
interactivity requests, checked the same way, answered at each press's `response_url`) for
the web app to mount; `run_socket_mode` is the second way in for deployments without a
public URL. Slack wants an answer within 3 seconds: a command that takes longer is answered
"working on it" and its reply goes to `response_url`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.signature import Clock as SignatureClock
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from bot.channels.slack import make_client
from bot.config import Config
from bot.core.errors import PaperbellError
from bot.core.models import Subscriber
from bot.core.plurals import plural
from bot.manage import Manager
from bot.pipeline import DeliveryRequest, Parts, deliver
from bot.slack.actions import ButtonAnswers, ButtonPress, parse_actions
from bot.slack.commands import SlashCommands
from bot.slack.messages import CommandRequest, Reply, SlackChannelInfo, SlackUser
from bot.store import Store
from bot.web.guards import parse_form, read_body

log = logging.getLogger(__name__)

REQUEST_WINDOW = 300  # seconds: Slack's timestamps are valid this long either side of now
MAX_STAMP_DIGITS = 12  # a Unix time in seconds has 10 digits until the year 2286
ACK_WITHIN = 2.5  # seconds: Slack gives up on an answer after 3
COMMANDS_PATH = "/slack/commands"
MAX_BODY = 16 * 1024  # a slash command's form is a few hundred bytes; text is at most 4k
ACTIONS_PATH = "/slack/actions"
# A button press carries the whole message it was in (a thread message of up to 50 blocks
# and 13,000 characters of text, URL-encoded: up to about 150 KB).
MAX_ACTION_BODY = 1024 * 1024
WORKING = Reply(":hourglass_flowing_sand: Working on it…")
FAILED = Reply(":warning: Something went wrong; paperbell's log says what.")


class SlackDirectory:
    """Who a user is and what a channel is, from the Web API (bot token)."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def user(self, user_id: str) -> SlackUser | None:
        data = await self._lookup(
            "users.info", "user", {"user_not_found", "users_not_found"}, user=user_id
        )
        if data is None:
            return None
        profile = data.get("profile") or {}
        return SlackUser(
            id=user_id,
            name=str(data.get("name") or ""),
            real_name=str(data.get("real_name") or profile.get("real_name") or ""),
            email=profile.get("email") or None,
            is_admin=bool(data.get("is_admin") or data.get("is_owner")),
            tz=data.get("tz") or None,
        )

    async def channel(self, channel_id: str) -> SlackChannelInfo | None:
        data = await self._lookup(
            "conversations.info", "channel", {"channel_not_found"}, channel=channel_id
        )
        if data is None:
            return None
        return SlackChannelInfo(
            id=channel_id,
            name=str(data.get("name") or channel_id),
            is_member=bool(data.get("is_member", True)),
            is_private=bool(data.get("is_private", False)),
        )

    async def _lookup(
        self, method: str, key: str, missing: set[str], **args: str
    ) -> dict[str, Any] | None:
        """`response[key]` of a Web API lookup; None if Slack says it does not exist."""
        try:
            response = await self.client.api_call(method, http_verb="GET", params=args)
        except SlackApiError as exc:
            code = exc.response.get("error")
            if code in missing:
                return None
            raise PaperbellError(
                f"Slack refused {method}: {code or f'HTTP {exc.response.status_code}'}",
                hint="reinstall the app from slack-app-manifest.yml (scopes users:read, "
                "channels:read) and check [slack] bot_token_env",
            ) from None
        except (TimeoutError, SlackClientError, OSError) as exc:
            raise PaperbellError(f"cannot reach Slack ({method}): {exc}") from None
        return dict(response.get(key) or {})


class LateWork:
    """What goes on after a request was answered (a reply sent to its `response_url`, a
    digest sent with it): waited for at a stop, or abandoned at its deadline."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self) -> None:
        """Wait for the work under way, that started meanwhile too."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def abandon(self) -> None:
        """Cancel the work under way and wait until it has ended: a digest it was sending
        is sent no further once this returns (its claims may then be handed back)."""
        while self._tasks:
            tasks = set(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


class SlackResponder:
    """Answers commands within Slack's 3 seconds; slower replies go to `response_url`."""

    def __init__(self, commands: SlashCommands, *, ack_within: float = ACK_WITHIN) -> None:
        self.commands = commands
        self.ack_within = ack_within
        self._later = LateWork()

    async def answer(
        self, request: CommandRequest, *, arrived: float | None = None
    ) -> dict[str, Any]:
        """The immediate answer (Slack's response body, or Socket Mode's ack payload);
        FAILED, logged, when the command raised, so that both ways in answer alike.
        `arrived`: when the request came (the event loop's clock), if its checks took time
        before: Slack's 3 seconds count from then."""
        try:
            return await self._answer(request, arrived)
        except Exception:  # the handler turns errors into replies; this is a bug
            log.exception("slash command failed")
            return FAILED.to_slack()

    async def _answer(self, request: CommandRequest, arrived: float | None) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        spent = 0.0 if arrived is None else loop.time() - arrived
        task = asyncio.ensure_future(self.commands.handle(request))
        if self.commands.is_slow(request) and request.response_url is not None:
            return self._later_reply(task, request.response_url)
        try:
            reply = await asyncio.wait_for(asyncio.shield(task), max(self.ack_within - spent, 0))
        except TimeoutError:
            if request.response_url is None:
                reply = await task  # nowhere to send it later: answer late
                return reply.to_slack()
            return self._later_reply(task, request.response_url)
        except asyncio.CancelledError:  # abandoned at a stop's deadline: its work too
            task.cancel()
            raise
        return reply.to_slack()

    def _later_reply(self, task: asyncio.Future[Reply], url: str) -> dict[str, Any]:
        self._later.add(self._respond_later(task, url))
        return WORKING.to_slack()

    async def _respond_later(self, task: asyncio.Future[Reply], url: str) -> None:
        try:
            reply = await task
        except Exception:  # the handler turns errors into replies; this is a bug
            log.exception("slash command failed")
            reply = FAILED
        await send_response(url, reply.to_slack(), what="the command's reply")

    async def wait(self) -> None:
        """Wait for the replies still being worked on (shutdown, tests)."""
        await self._later.wait()

    async def abandon(self) -> None:
        """Cancel the replies still being worked on (a stop's deadline) and wait for them to
        end."""
        await self._later.abandon()


async def send_response(url: str, body: dict[str, Any], *, what: str) -> None:
    """Post an answer to a `response_url` (logged, never raised, when it cannot go)."""
    try:
        response = await AsyncWebhookClient(url, timeout=10).send_dict(body)
    except (TimeoutError, SlackClientError, OSError) as exc:
        log.error("cannot send %s to Slack: %s", what, exc)
        return
    if response.status_code != 200:
        log.error("Slack refused %s: %s %s", what, response.status_code, response.body)


class ButtonResponder:
    """Answers presses of paperbell's buttons: the verdict recorded at once (a few store
    queries, in a thread), the answer posted to the press's `response_url` after the
    request is acknowledged."""

    def __init__(self, answers: ButtonAnswers) -> None:
        self.answers = answers
        self._later = LateWork()

    async def press(self, presses: list[ButtonPress]) -> None:
        for press in presses:
            try:
                answer = await run_in_threadpool(self.answers.answer, press)
            except PaperbellError as exc:
                log.error("cannot record a Slack button press: %s", exc)
                answer = FAILED.to_slack()
            if press.response_url is None:
                continue
            self._later.add(send_response(press.response_url, answer, what="a button's answer"))

    async def wait(self) -> None:
        """Wait for the answers still being sent (shutdown, tests)."""
        await self._later.wait()

    async def abandon(self) -> None:
        """Cancel the answers still being sent (a stop's deadline) and wait for them to
        end."""
        await self._later.abandon()


class RequestChecker:
    """Slack's v0 request signature, timestamps within 5 minutes, and no replays.

    The signature and its age are slack-sdk's to check (`SignatureVerifier`); around it,
    every header and body a stranger can send gets an answer here, never an exception (a
    timestamp that is no number, a signature or a body the verifier cannot read: Slack's
    are ASCII, its bodies urlencoded), and signatures already accepted are kept in the
    database (`store`), so a replay is refused after a restart and by every process
    sharing it; without a store (tests, a one-off), in memory.
    """

    def __init__(
        self,
        signing_secret: str,
        *,
        store: Store | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.now = now
        self._verifier = SignatureVerifier(signing_secret, clock=_Clock(now))
        self._seen: dict[str, float] = {}  # signature -> when it was first seen (no store)

    def check(self, body: bytes, headers: Mapping[str, str]) -> str | None:
        """None if the request is Slack's and new; otherwise why it is refused."""
        lowered = {k.lower(): v for k, v in headers.items()}
        signature = lowered.get("x-slack-signature", "")
        stamp = lowered.get("x-slack-request-timestamp", "")
        if not signature or not stamp:
            return "unsigned request"
        # ASCII digits only: "¹²³".isdigit() is True, but int() refuses it.
        if not (stamp.isascii() and stamp.isdigit()) or len(stamp) > MAX_STAMP_DIGITS:
            return "bad timestamp"
        now = self.now()
        if abs(now - int(stamp)) > REQUEST_WINDOW:
            return "stale request (timestamp more than 5 minutes away)"
        try:
            body.decode("utf-8")  # the verifier reads it as text
        except UnicodeDecodeError:
            return "bad signature"
        if not signature.isascii() or not self._verifier.is_valid(body, stamp, signature):
            return "bad signature"
        # Remembered until its timestamp goes stale, not until 5 minutes after it came: a
        # timestamp ahead of our clock would otherwise be accepted again in between.
        if not self._first_time(signature, now, max(now, float(int(stamp)))):
            return "replayed request"
        return None

    def _first_time(self, signature: str, now: float, until: float) -> bool:
        if self.store is not None:
            return self.store.slack_requests.first(
                signature,
                now=datetime.fromtimestamp(now, UTC),
                stamp=datetime.fromtimestamp(until, UTC),
                window=timedelta(seconds=REQUEST_WINDOW),
            )
        self._seen = {s: t for s, t in self._seen.items() if now - t <= REQUEST_WINDOW}
        if signature in self._seen:
            return False
        self._seen[signature] = until
        return True


class _Clock(SignatureClock):
    """The checker's clock, for slack-sdk's verifier (a test's, or the time)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def now(self) -> float:
        return self._now()


async def checked_form(
    request: Request, checker: RequestChecker, *, limit: int, what: str
) -> dict[str, str] | Response:
    """A Slack request's form, once checked (size, signature, age, replay); else the answer
    that refuses it (413, 503, 401), or Slack's `ssl_check` answered."""
    body = await read_body(request, limit)
    if body is None:
        return PlainTextResponse("request too large", status_code=413)
    try:  # the replay check reads the database: in a thread
        problem = await run_in_threadpool(checker.check, body, request.headers)
    except PaperbellError as exc:
        log.error("cannot check a Slack %s request: %s", what, exc)
        return PlainTextResponse("cannot check the request now", status_code=503)
    if problem is not None:
        log.warning("refused a Slack %s request: %s", what, problem)
        return PlainTextResponse(problem, status_code=401)
    form = parse_form(body)
    if form.get("ssl_check"):
        return PlainTextResponse("ok")
    return form


class CommandEndpoint:
    """`POST /slack/commands`: a request checked (size, signature, age, replay), then answered
    by `responder`. Whatever a stranger sends gets a 4xx, never a 500."""

    def __init__(self, responder: SlackResponder, checker: RequestChecker) -> None:
        self.responder = responder
        self.checker = checker

    async def post(self, request: Request) -> Response:
        # The check may wait for the database (the replay table): Slack's clock is running.
        arrived = asyncio.get_running_loop().time()
        form = await checked_form(request, self.checker, limit=MAX_BODY, what="command")
        if isinstance(form, Response):
            return form
        answer = await self.responder.answer(CommandRequest.from_form(form), arrived=arrived)
        return JSONResponse(answer)


class ActionEndpoint:
    """`POST /slack/actions`: Slack's interactivity requests (presses of the 👍 / 👎 and Undo
    buttons), checked as the command's are (size, signature, age, replay), acknowledged
    with an empty 200; the answer goes to the press's `response_url`. Whatever a stranger
    sends gets a 4xx, never a 500."""

    def __init__(self, buttons: ButtonResponder | None, checker: RequestChecker) -> None:
        self.buttons = buttons
        self.checker = checker

    async def post(self, request: Request) -> Response:
        form = await checked_form(
            request, self.checker, limit=MAX_ACTION_BODY, what="interactivity"
        )
        if isinstance(form, Response):
            return form
        presses = parse_actions(form.get("payload", ""))
        if isinstance(presses, str):
            log.warning("refused a Slack interactivity request: %s", presses)
            return PlainTextResponse(presses, status_code=400)
        if self.buttons is None:
            log.warning("a Slack button was pressed, but [web] has no secret key to check it")
            return PlainTextResponse(
                "buttons are not set up: [web] secret_key_env", status_code=404
            )
        await self.buttons.press(presses)
        return Response(status_code=200)


async def _not_set_up(request: Request) -> Response:
    """`POST /slack/commands` (or `/slack/actions`) when paperbell takes no signed
    requests: what to set."""
    return PlainTextResponse(
        "Slack commands are not set up: set [slack] signing_secret_env", status_code=404
    )


async def run_socket_mode(
    responder: SlackResponder,
    *,
    app_token: str,
    api_url: str,
    stop: asyncio.Event,
    buttons: ButtonResponder | None = None,
) -> None:
    """Receive slash commands (and presses of the `buttons`) over Socket Mode until `stop`
    is set (no public URL needed); then take no more, and close once the requests being
    answered are acknowledged over the WebSocket (their late replies are the responders'
    to wait for), as the web app stops. Cancelled meanwhile (a stop's deadline), it
    abandons them, and says so."""
    client = SocketModeClient(
        app_token=app_token, web_client=AsyncWebClient(base_url=api_url), ping_interval=10
    )
    answering: set[asyncio.Task[Any]] = set()  # slack-sdk's tasks running `on_request`

    async def on_request(client: SocketModeClient, request: SocketModeRequest) -> None:
        if stop.is_set():  # as the web app, which takes no request once it is stopping
            log.warning("a Slack %s request came while stopping: not answered", request.type)
            return
        task = asyncio.current_task()
        this = {task} if task is not None else set()
        answering.update(this)
        try:
            await answer(client, request)
        finally:
            answering.difference_update(this)

    async def answer(client: SocketModeClient, request: SocketModeRequest) -> None:
        if request.type != "slash_commands":
            await client.send_socket_mode_response(SocketModeResponse(request.envelope_id))
            if request.type == "interactive" and buttons is not None:
                presses = parse_actions(_as_json(request.payload))
                if isinstance(presses, list):
                    await buttons.press(presses)
            return
        payload = await responder.answer(CommandRequest.from_form(dict(request.payload)))
        await client.send_socket_mode_response(
            SocketModeResponse(envelope_id=request.envelope_id, payload=payload)
        )

    client.socket_mode_request_listeners.append(on_request)  # type: ignore[arg-type]
    try:
        await client.connect()
        log.info("Socket Mode connected: slash commands come over the WebSocket")
        await stop.wait()
        while answering:  # their acks need the WebSocket open
            await asyncio.wait(set(answering))
        await client.close()  # a round trip: Slack answers the close frame
    except BaseException:  # cut off (a stop's deadline), or Slack refused the connection
        if answering:
            log.warning(
                "abandoned %s being answered over Socket Mode",
                plural(len(answering), "Slack request"),
            )
            for task in answering:
                task.cancel()
        await _dropped(client)
        raise


async def _dropped(client: SocketModeClient) -> None:
    """End `client` at once, without waiting for Slack (its answer to the close frame): its
    tasks cancelled, its connections closed. Nothing of it is left open or running on."""
    tasks = (client.message_receiver, client.current_session_monitor, client.message_processor)
    for task in tasks:
        if task is not None:
            task.cancel()
    await client.aiohttp_client_session.close()


def _as_json(payload: object) -> str:
    """A Socket Mode payload (parsed already) as the JSON `parse_actions` reads."""
    try:
        return json.dumps(payload)
    except (TypeError, ValueError, RecursionError):
        return ""


@dataclass(frozen=True)
class SlackApp:
    """The slash command's and the buttons' ways in, as the config sets them up."""

    responder: SlackResponder
    checker: RequestChecker | None  # POST /slack/commands (signing secret set)
    app_token: str | None  # Socket Mode
    api_url: str
    buttons: ButtonResponder | None = None  # the 👍 / 👎 buttons ([web] secret key set)

    @property
    def http(self) -> tuple[SlackResponder, RequestChecker] | None:
        return (self.responder, self.checker) if self.checker is not None else None


def build_slack_app(
    config: Config,
    parts: Parts,
    *,
    manager: Manager | None,
    mail_queued: Callable[[], Awaitable[None]],
    clock: Callable[[], datetime],
) -> SlackApp | None:
    """The slash command over the wired `parts`, if [slack] has a bot token: `digest`
    delivers through them; `manager` (None without [web]'s pages) answers the buttons and
    the commands that mail a link, and `mail_queued()` sends that mail at once. The config
    file's subscribers must be in the store already, so that a config `slack_user` or
    `slack_channel` is found when its person or channel uses /papers."""
    slack = config.slack
    if slack is None or not slack.bot_token:
        return None
    if not (slack.signing_secret or slack.app_token):
        log.warning(
            "[slack] has neither signing_secret_env nor app_token_env: %s cannot be used",
            slack.command,
        )
    store = parts.store
    directory = SlackDirectory(make_client(parts.settings["slack"]))

    def subscriber_named(name: str) -> Subscriber | None:
        """The active subscriber `name`, read alone (by its index, not with everyone)."""
        record = store.subscribers.get(name)
        if record is None:
            return None
        found = parts.stored(record)
        return found if found is not None and found.active else None

    async def send_now(name: str) -> list[Any]:
        # Their digest alone: the run plans for them, not for every subscriber.
        sub = await asyncio.to_thread(subscriber_named, name)
        request = DeliveryRequest(only=name, subscribers=[sub] if sub is not None else None)
        return await deliver(parts, request, now=clock(), clock=clock)

    commands = SlashCommands(
        slack,
        parts,
        directory,
        send_now,
        clock,
        max_rules=config.digest.max_rules,
        manager=manager,
        mail_queued=mail_queued,
    )
    checker = RequestChecker(slack.signing_secret, store=store) if slack.signing_secret else None
    buttons = ButtonResponder(ButtonAnswers(manager)) if manager is not None else None
    return SlackApp(SlackResponder(commands), checker, slack.app_token, slack.api_url, buttons)


def slack_routes(slack: SlackApp | None) -> list[Route]:
    """`POST /slack/commands` and `POST /slack/actions`, for `bot.web.app.create_app`: the
    slash command and the buttons when `slack` takes signed requests ([slack]
    signing_secret_env is set), else a 404 that says so."""
    if slack is None or slack.checker is None:
        return [
            Route(COMMANDS_PATH, _not_set_up, methods=["POST"]),
            Route(ACTIONS_PATH, _not_set_up, methods=["POST"]),
        ]
    endpoint = CommandEndpoint(slack.responder, slack.checker)
    actions = ActionEndpoint(slack.buttons, slack.checker)
    return [
        Route(COMMANDS_PATH, endpoint.post, methods=["POST"]),
        Route(ACTIONS_PATH, actions.post, methods=["POST"]),
    ]
