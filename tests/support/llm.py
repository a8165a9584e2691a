"""A stand-in of the OpenAI chat completions API for the tests: not OpenAI, and not a model.

`llm_standin()` serves, on 127.0.0.1 on a free port from a background thread, the two calls
an OpenAI-compatible client makes: `POST /v1/chat/completions` and `GET /v1/models` (and
`GET /v1/models/{id}`). It speaks the real protocol, so the official `openai` client's own
retries, backoff (`Retry-After`, `retry-after-ms`), timeouts and error classes are exercised
for real: answers shaped like OpenAI's (`chat.completion` objects with `usage`), errors with
OpenAI's status codes and bodies (`{"error": {"message", "type", "param", "code"}}`), 400s
for bodies the real API refuses, 401s when an API key is required and missing or wrong.

What each request gets, in this order:
1. `down()`: nothing; the port is closed (connection refused) until `up()`.
2. `api_key` set and the `Authorization: Bearer` header missing or wrong: 401.
3. An unknown path: 404; a body that is not JSON, or without `model` or `messages`, or
   with `messages` not a non-empty list of objects with a role: 400; `stream: true`: 400
   (not supported here); a model not in `models` (when given): 404 model_not_found; a
   prompt over `context_window` (when given): 400 context_length_exceeded.
4. The next scripted step, if any (`fail_next`, `respond_next`, `drop_next`, `hang_next`,
   `garbage_next`, `flood_next`, or `script(step)`): each is used `times` times in order,
   `times=None` meaning every request from then on. Steps are taken in the order requests arrive.
5. Otherwise `answer(request)`: a str (the answer's content) or any step (a `Reply`,
   `Fail`, ...), so a test can answer each paper its own way. The default,
   `default_answer`, is described there; it is deterministic, so tests can predict it.
Any delay (`delay()`, a step's own `delay`) and `hold()` come before the answer is sent;
they, and `Hang`, end early when the client goes away, and never hold up `stop()`/`down()`.
A normal answer is cut to `max_tokens`/`max_completion_tokens` (finish_reason "length").

Every request is recorded (`requests`: path, headers, parsed body, status answered, how it
ended), with the most requests ever in flight at once (`max_in_flight`).

Token counts are an estimate (`estimate_tokens`: a CJK character or a run of other
non-space characters is one token), the same every time.

What it does not do: streaming (`stream: true` is refused), tools and function calls,
images and audio, `n` > 1, logprobs, JSON mode or structured outputs (the parameters are
recorded and ignored), embeddings and every other endpoint, rate limits of its own (they
are scripted with `fail_next(429, ...)`).
"""

from __future__ import annotations

import json
import re
import select
import socket
import struct
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import langcodes

from bot.core.languages import language_script
from bot.demo import free_port

__all__ = [
    "DEFAULT_MODEL",
    "Drop",
    "Fail",
    "Flood",
    "Garbage",
    "Hang",
    "LlmStandIn",
    "Reply",
    "StandInRequest",
    "default_answer",
    "estimate_tokens",
    "fake_translation",
    "llm_standin",
    "unused_base_url",
]

DEFAULT_MODEL = "standin-chat"  # what /v1/models lists when `models` is not given
CHAT_PATH = "/v1/chat/completions"

# ---- the scripted steps ------------------------------------------------------------------

_USAGE_AUTO: Any = object()  # Reply.usage: estimated from the request and the content


@dataclass
class Reply:
    """A 200 chat.completion. `content` None sends `"content": null` (with `refusal`, a
    refusal); `message_extra` adds fields to the message (`reasoning_content`,
    `reasoning`), `choice_extra` to the choice, `extra` to the top object. `usage` replaces
    the estimated usage (None leaves it out, as some local servers do)."""

    content: str | None
    finish_reason: str = "stop"
    refusal: str | None = None
    message_extra: dict[str, Any] = field(default_factory=dict)
    choice_extra: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    usage: Any = _USAGE_AUTO
    delay: float = 0.0  # seconds before answering


@dataclass
class Fail:
    """An HTTP error with an OpenAI-shaped body. `message`, `type` and `code` default to
    what OpenAI sends for the status (or for `code`, when given): see `_ERRORS`; `code=""`
    sends a null code.
    `retry_after` (seconds) sends `Retry-After`, `retry_after_ms` sends `retry-after-ms`;
    `headers` adds any other (`x-should-retry`)."""

    status: int
    message: str | None = None
    type: str | None = None
    code: str | None = None
    param: str | None = None
    retry_after: float | None = None
    retry_after_ms: float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Drop:
    """Close the connection without an answer (with a TCP reset when `reset`)."""

    reset: bool = False


@dataclass
class Hang:
    """Never answer: wait until the client goes away, `down()` or the stand-in stops."""


@dataclass
class Garbage:
    """A body that is not what the client expects: not JSON, cut off, or HTML from a proxy."""

    body: str | bytes = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    status: int = 200
    content_type: str = "application/json"


@dataclass
class Flood:
    """A 200 chat.completion whose content runs to `size` bytes, sent as fast as the client
    reads, its end told by closing the connection (no Content-Length; `declared`: with
    one). The bytes sent are kept (`StandInRequest.sent`)."""

    size: int
    declared: bool = False


Step = Reply | Fail | Drop | Hang | Garbage | Flood

# status -> (type, code, message); and code -> (status, type, message), as OpenAI sends them.
_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: sk-***. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    403: ("invalid_request_error", None, "You are not allowed to use this model."),
    404: (
        "invalid_request_error",
        "model_not_found",
        "The model `{model}` does not exist or you do not have access to it.",
    ),
    408: ("server_error", None, "Request timed out."),
    409: ("server_error", None, "Conflict."),
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for {model} in organization org-standin on requests per min "
        "(RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
    ),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
    504: ("server_error", None, "Gateway timeout."),
}
_CODES: dict[str, tuple[str, str]] = {
    "context_length_exceeded": (
        "invalid_request_error",
        "This model's maximum context length is {window} tokens. However, your messages "
        "resulted in {tokens} tokens. Please reduce the length of the messages.",
    ),
    "insufficient_quota": (
        "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details. For more "
        "information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors.",
    ),
}

# ---- a request and its record ------------------------------------------------------------


@dataclass
class StandInRequest:
    """One request received, and (once answered) what came of it. `headers` has lower-case
    names; `body` is the parsed JSON (None when not JSON). `status` is the HTTP status
    answered, None when no answer was sent; `outcome` is "pending", "answered",
    "dropped" (a scripted Drop), "gone" (the client left first: its timeout) or "cut"
    (no answer: `down()` or `stop()` came first)."""

    at: float  # time.monotonic() when received
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any
    status: int | None = None
    outcome: str = "pending"
    answered_at: float | None = None
    response: Any = None  # the body answered (a dict, or the raw garbage)
    sent: int = 0  # body bytes sent (a Flood's)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def model(self) -> str | None:
        model = self.body.get("model") if isinstance(self.body, dict) else None
        return model if isinstance(model, str) else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        if not isinstance(messages, list):
            return []
        return [m for m in messages if isinstance(m, dict)]

    def texts(self, role: str) -> list[str]:
        """The text of each message of that role, in order (content parts joined)."""
        return [_text_of(m.get("content")) for m in self.messages if m.get("role") == role]

    @property
    def user_text(self) -> str:
        """The last user message's text ("" when none)."""
        texts = self.texts("user")
        return texts[-1] if texts else ""

    @property
    def system_text(self) -> str:
        """The system (and developer) messages' text, joined by blank lines."""
        return "\n\n".join(self.texts("system") + self.texts("developer"))

    @property
    def max_tokens(self) -> int | None:
        if not isinstance(self.body, dict):
            return None
        for key in ("max_completion_tokens", "max_tokens"):
            value = self.body.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None

    @property
    def temperature(self) -> float | None:
        value = self.body.get("temperature") if isinstance(self.body, dict) else None
        return float(value) if isinstance(value, int | float) else None

    @property
    def retry_count(self) -> int:
        """Which try this is for the openai client (0 the first; its x-stainless-retry-count)."""
        value = self.header("x-stainless-retry-count") or "0"
        return int(value) if value.isdigit() else 0


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


# ---- tokens, and the default answer ------------------------------------------------------

_CJK = "\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_TOKEN = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")


def estimate_tokens(text: str) -> int:
    """The stand-in's token count: each CJK character, and each run of other non-space
    characters, is one token."""
    return len(_TOKEN.findall(text))


def _cut(text: str, tokens: int) -> str:
    """The text up to the end of its `tokens`-th token."""
    ends = [match.end() for match in _TOKEN.finditer(text)]
    return text if tokens >= len(ends) else text[: ends[tokens - 1]] if tokens > 0 else ""


_MARKER = re.compile(r"^[ \t]*(?:Title|Abstract|Text|Summary)[ \t]*:[ \t]*", re.I | re.M)
_INTO = re.compile(r"\b(?:into|to|in)\s+([A-Z][\w-]*(?:\s+[A-Z][\w-]*)?(?:\s+\([\w ]+\))?)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

# What a fake translation is written with, per ISO 15924 script: CJK scripts as a fixed text
# taken from a point that depends on the source (so two sources give two texts), alphabets
# as a letter-for-letter map of a-z.
_PREFIXED_TEXTS = {
    "Hans": (
        "译：",
        "本文提出一种新的方法用于研究语言模型的推理能力我们在多个数据集上进行实验结果表明该方法显著优于现有基线",
    ),
    "Hant": (
        "譯：",
        "本文提出一種新的方法用於研究語言模型的推理能力我們在多個資料集上進行實驗結果表明該方法顯著優於現有基線",
    ),
    "Jpan": (
        "訳：",
        "本論文では言語モデルの推論能力を調べるための新しい手法を提案しますいくつかのデータセットで実験を行い既存の手法よりも優れていることを示します",
    ),
    "Kore": (
        "번역: ",
        "이논문은언어모델의추론능력을연구하는새로운방법을제안합니다여러데이터세트에서실험한결과기존방법보다우수합니다",
    ),
}
_ALPHABETS = {
    "Cyrl": "абвгдежзийклмнопрстуфхцчшщыэюя",
    "Grek": "αβγδεζηθικλμνξοπρστυφχψω",
    "Arab": "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
    "Hebr": "אבגדהוזחטיכלמנסעפצקרשת",
    "Deva": "अआइईउऊएऐओऔकखगघचछजझटठडढणतथदधनपफबभमयरलवशसह",
    "Thai": "กขคงจฉชซญฎฏฐฑฒณดตถทธนบปผฝพฟภมยรลวศษสหฬอฮ",
}


def fake_translation(text: str, tag: str) -> str:
    """The default answer's "translation" of `text` into the language `tag`, by the script
    the language is written in (`bot.core.languages.language_script`):

    - Chinese (Hans): "译：" and len(text)//3 (at least 2) characters of a fixed Chinese
      text, from a point given by the text's CRC-32; Hant "譯：", Japanese "訳：" (with
      kana), Korean "번역: ", the same way;
    - Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai: "[tag] " and the text with each
      Latin letter mapped to a letter of that alphabet;
    - Latin and any other: "[tag] " and the text's words in reverse order."""
    script = language_script(tag)
    if script in _PREFIXED_TEXTS:
        prefix, source = _PREFIXED_TEXTS[script]
        length = max(2, len(text) // 3)
        start = zlib.crc32(text.encode()) % len(source)
        return prefix + "".join(source[(start + i) % len(source)] for i in range(length))
    if script in _ALPHABETS:
        alphabet = _ALPHABETS[script]

        def letter(char: str) -> str:
            if "a" <= char.lower() <= "z":
                return alphabet[(ord(char.lower()) - ord("a")) % len(alphabet)]
            return char

        return f"[{tag}] " + "".join(letter(char) for char in text)
    return f"[{tag}] " + " ".join(reversed(text.split()))


def _payload(text: str) -> str:
    """What the request asks about: the text after the last `Title:`/`Abstract:`/`Text:`/
    `Summary:` line marker, else after the last blank line, else all of it."""
    markers = list(_MARKER.finditer(text))
    if markers:
        return text[markers[-1].end() :].strip()
    return re.split(r"\n[ \t]*\n", text.strip())[-1].strip()


_NOT_LANGUAGES = {"The", "This", "That", "These", "Its", "A", "An"}  # "The" is one (thx)


def _asked_language(instruction: str) -> str | None:
    """The tag of the first language named (in English) after "into", "to" or "in", other
    than English: "into Chinese (Traditional)" -> zh-Hant."""
    for match in _INTO.finditer(instruction):
        words = match.group(1)
        # "Chinese (Traditional) text", "German Please": try the longest name first.
        bare = re.sub(r"\s+\(.*", "", words)
        candidates = [words, bare, bare.split()[0], bare.split()[-1]]
        for name in candidates:
            if name in _NOT_LANGUAGES:
                continue
            try:
                language = langcodes.find(name)
            except LookupError:
                continue
            if language.language != "en":
                return language.to_tag()
    return None


def default_answer(request: StandInRequest) -> str:
    """The stand-in's answer when a test sets none: deterministic, from the last user
    message and the system messages.

    The payload is the user message's text after its last `Title:`/`Abstract:`/`Text:`/
    `Summary:` line marker, else after its last blank line, else all of it; the rest (and
    the system messages) is the instruction. If the instruction says "translat", the
    answer is `fake_translation` of the payload into the language it names after "into",
    "to" or "in" ("into Chinese", "to Simplified Chinese"; "xx" when it names none). Else if
    it says "summar" (summarise, summarize, summary), the answer is the payload's first two
    sentences, translated the same way if it names a language ("Summarise in German").
    Else, a language named: the payload translated. Anything else: "Stand-in answer: " and
    the payload's first sentence."""
    user = request.user_text
    payload = _payload(user)
    cut = user.rfind(payload) if payload else -1
    instruction = request.system_text + "\n\n" + (user[:cut] if cut >= 0 else user)
    lowered = instruction.lower()
    sentences = [s for s in _SENTENCE_END.split(payload.strip()) if s]
    language = _asked_language(instruction)
    if "translat" in lowered:
        return fake_translation(payload, language or "xx")
    if "summar" in lowered:
        summary = " ".join(sentences[:2])
        return fake_translation(summary, language) if language else summary
    if language:
        return fake_translation(payload, language)
    return "Stand-in answer: " + (sentences[0] if sentences else "")


# ---- the server --------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # the stand-in joins its own handlers (stop())
    request_queue_size = 128

    resets: set[Any]  # connections to end with a TCP reset (Drop(reset=True))

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a connection the client (or down()) closed; any other fault is recorded

    def shutdown_request(self, request: Any) -> None:
        if request in self.resets:  # no FIN first: close() with SO_LINGER 0 sends the RST
            self.resets.discard(request)
            self.close_request(request)
        else:
            super().shutdown_request(request)


class LlmStandIn:
    """The stand-in: `start()` it (or use `llm_standin()`), point the openai client at
    `base_url`, script what it answers, then read `requests`."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        models: Sequence[str] | None = None,
        context_window: int | None = None,
    ) -> None:
        self.api_key = api_key  # when set, requests need `Authorization: Bearer <api_key>`
        self.models = list(models) if models is not None else None  # None: any model
        self.context_window = context_window
        self.answer: Callable[[StandInRequest], str | Step] = default_answer
        self.errors: list[BaseException] = []  # the stand-in's own faults (an `answer` raising)
        self.port = 0
        self._requests: list[StandInRequest] = []
        self._script: list[list[Any]] = []  # [step, times left or None]
        self._delays: list[float] = []  # the next answers' delays
        self._delay_all = 0.0
        self._in_flight = 0
        self._max_in_flight = 0
        self._served = 0
        self._changed = threading.Condition()  # guards all of the above
        self._gate = threading.Event()  # cleared by hold()
        self._gate.set()
        self._halt = threading.Event()  # set by down()/stop(): waiting answers give up
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[socket.socket, threading.Thread] = {}

    # ---- lifecycle -------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What the openai client's `base_url` is: http://127.0.0.1:PORT/v1."""
        if not self.port:
            raise RuntimeError("the LLM stand-in is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def is_up(self) -> bool:
        return self._server is not None

    def start(self) -> LlmStandIn:
        if self._server is None:
            self._listen(self.port)
        return self

    def stop(self) -> None:
        """Stop serving: waiting answers end without one, open connections close."""
        self._close()

    def down(self) -> None:
        """Close the port (connections are refused) and every open connection, as a server
        that died would; `up()` opens it again, on the same port."""
        self._close()

    def up(self) -> None:
        if self._server is None:
            self._listen(self.port)

    def __enter__(self) -> LlmStandIn:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if exc is None and self.errors:
            raise RuntimeError(f"the LLM stand-in failed: {self.errors[0]!r}") from self.errors[0]

    def _listen(self, port: int) -> None:
        self._halt = threading.Event()
        standin = self

        class Handler(_Handler):
            owner = standin

        self._server = _Server(("127.0.0.1", port), Handler)
        self._server.resets = set()
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            args=(0.02,),  # poll interval: shutdown() returns quickly
            name=f"llm-standin-{self.port}",
            daemon=True,
        )
        self._thread.start()

    def _close(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        self._halt.set()  # answers waiting (delay, hold, hang) end unanswered
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()
        self._server = self._thread = None
        with self._changed:
            connections = dict(self._connections)
        for conn in connections:
            with suppress(OSError):  # wakes a handler waiting for a next request
                conn.shutdown(socket.SHUT_RDWR)
        for worker in connections.values():
            worker.join(5)

    # ---- scripting -------------------------------------------------------------------

    def script(self, step: Step, *, times: int | None = 1) -> None:
        """Answer the next `times` chat requests (after those already scripted) with `step`;
        `times=None`: every one from then on."""
        if times is not None and times < 1:
            raise ValueError("times must be at least 1 (or None: always)")
        with self._changed:
            self._script.append([step, times])

    def fail_next(
        self,
        status: int,
        *,
        message: str | None = None,
        type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        retry_after: float | None = None,
        retry_after_ms: float | None = None,
        headers: dict[str, str] | None = None,
        times: int | None = 1,
    ) -> None:
        """Answer with an HTTP error and OpenAI's body for it, e.g. `fail_next(429,
        retry_after=1)`, `fail_next(429, code="insufficient_quota")`, `fail_next(400,
        code="context_length_exceeded")`, `fail_next(401)`, `fail_next(503, times=None)`."""
        self.script(
            Fail(
                status,
                message=message,
                type=type,
                code=code,
                param=param,
                retry_after=retry_after,
                retry_after_ms=retry_after_ms,
                headers=dict(headers or {}),
            ),
            times=times,
        )

    def respond_next(
        self,
        content: str | None,
        *,
        finish_reason: str = "stop",
        refusal: str | None = None,
        message_extra: dict[str, Any] | None = None,
        choice_extra: dict[str, Any] | None = None,
        usage: Any = _USAGE_AUTO,
        delay: float = 0.0,
        times: int | None = 1,
    ) -> None:
        """Answer 200 with this content (None: `"content": null`), e.g. `respond_next("")`,
        `respond_next(None, refusal="I can't help with that.")`, `respond_next("Half a",
        finish_reason="length")`, `respond_next("<think>hmm</think>The summary.")`,
        `respond_next("The summary.", message_extra={"reasoning_content": "hmm"})`."""
        self.script(
            Reply(
                content,
                finish_reason=finish_reason,
                refusal=refusal,
                message_extra=dict(message_extra or {}),
                choice_extra=dict(choice_extra or {}),
                usage=usage,
                delay=delay,
            ),
            times=times,
        )

    def drop_next(self, *, reset: bool = False, times: int | None = 1) -> None:
        """Close the connection without answering."""
        self.script(Drop(reset=reset), times=times)

    def hang_next(self, *, times: int | None = 1) -> None:
        """Never answer (until the client gives up, `down()` or `stop()`)."""
        self.script(Hang(), times=times)

    def garbage_next(
        self,
        body: str | bytes = Garbage.body,
        *,
        status: int = 200,
        content_type: str = "application/json",
        times: int | None = 1,
    ) -> None:
        """Answer with a body that is not a chat completion (HTML, cut-off JSON, ...)."""
        self.script(Garbage(body, status=status, content_type=content_type), times=times)

    def flood_next(self, size: int, *, declared: bool = False, times: int | None = 1) -> None:
        """Answer with a chat completion of `size` bytes (a broken or hostile endpoint)."""
        self.script(Flood(size, declared=declared), times=times)

    def delay(self, seconds: float, *, times: int | None = None) -> None:
        """Wait `seconds` before each of the next `times` chat answers (None: every one from
        now on; `delay(0)` ends it). Counted delays are used before the standing one."""
        with self._changed:
            if times is None:
                self._delay_all = seconds
                self._delays.clear()
            else:
                self._delays.extend([seconds] * times)

    def hold(self) -> None:
        """Keep every chat answer waiting (counted in flight) until `release()`."""
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    def reset(self) -> None:
        """Forget the script, delays, hold and records (the `answer` stays)."""
        with self._changed:
            self._script.clear()
            self._delays.clear()
            self._delay_all = 0.0
            self._requests.clear()
            self._max_in_flight = self._in_flight
            self._gate.set()

    # ---- what it saw -----------------------------------------------------------------

    @property
    def requests(self) -> list[StandInRequest]:
        """Every request received, in order (a copy)."""
        with self._changed:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[StandInRequest]:
        return self.requests_for(path=CHAT_PATH)

    def requests_for(
        self,
        *,
        model: str | None = None,
        path: str | None = None,
        status: int | None = None,
        outcome: str | None = None,
    ) -> list[StandInRequest]:
        return [
            r
            for r in self.requests
            if (model is None or r.model == model)
            and (path is None or r.path == path)
            and (status is None or r.status == status)
            and (outcome is None or r.outcome == outcome)
        ]

    @property
    def statuses(self) -> Counter[int | None]:
        """How many requests got each status (None: no answer)."""
        return Counter(r.status for r in self.requests)

    @property
    def in_flight(self) -> int:
        with self._changed:
            return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """The most requests (of any path) received and not yet finished at one time."""
        with self._changed:
            return self._max_in_flight

    def wait_for(self, condition: Callable[[], bool], *, timeout: float = 5.0) -> None:
        """Wait until `condition()` holds (checked whenever a request comes or ends);
        raises TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the LLM stand-in did not get there in time")
                self._changed.wait(min(left, 0.05))

    def wait_for_requests(self, count: int, *, timeout: float = 5.0) -> None:
        """Wait until `count` requests have been received (answered or not)."""
        self.wait_for(lambda: len(self._requests) >= count, timeout=timeout)

    # ---- answering (in the handler's thread) -----------------------------------------

    def _arrive(self, record: StandInRequest) -> None:
        with self._changed:
            self._requests.append(record)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            self._changed.notify_all()

    def _finish(self, record: StandInRequest, status: int | None, outcome: str) -> None:
        with self._changed:
            record.status = status
            record.outcome = outcome
            record.answered_at = time.monotonic()
            self._in_flight -= 1
            self._changed.notify_all()

    def _amend(self, record: StandInRequest, status: int | None, outcome: str) -> None:
        with self._changed:
            record.status = status
            record.outcome = outcome
            self._changed.notify_all()

    def _next_step(self) -> tuple[Step | None, float]:
        with self._changed:
            step: Step | None = None
            if self._script:
                entry = self._script[0]
                step = entry[0]
                if entry[1] is not None:
                    entry[1] -= 1
                    if entry[1] == 0:
                        self._script.pop(0)
            delay = self._delays.pop(0) if self._delays else self._delay_all
            self._served += 1
            return step, delay

    def _next_id(self) -> str:
        with self._changed:
            return f"chatcmpl-standin{self._served:013d}"

    def _route(self, record: StandInRequest) -> Step | dict[str, Any] | None:
        """What a request gets before any script: a refusal (a Fail), the models (a dict),
        or None for a chat request to answer."""
        if self.api_key is not None:
            auth = record.header("authorization") or ""
            if not auth.startswith("Bearer ") or not auth[7:].strip():
                return Fail(
                    401,
                    message="You didn't provide an API key. You need to provide your API key "
                    "in an Authorization header using Bearer auth (i.e. Authorization: Bearer "
                    "YOUR_KEY), or as the password field (with blank username) if you're "
                    "accessing the API from your browser and are prompted for a username and "
                    "password. You can obtain an API key from "
                    "https://platform.openai.com/account/api-keys.",
                    type="invalid_request_error",
                    code="",
                )
            if auth[7:].strip() != self.api_key:
                shown = auth[7:].strip()
                shown = shown[:3] + "*" * 8 + shown[-4:] if len(shown) > 8 else "sk-***"
                return Fail(
                    401,
                    message=f"Incorrect API key provided: {shown}. You can find your API "
                    "key at https://platform.openai.com/account/api-keys.",
                    code="invalid_api_key",
                )
        path = record.path.split("?", 1)[0].rstrip("/")
        if record.method == "GET" and path == "/v1/models":
            return {"object": "list", "data": [_model(m) for m in self._listed()]}
        if record.method == "GET" and path.startswith("/v1/models/"):
            name = path[len("/v1/models/") :]
            if self.models is None or name in self.models:
                return _model(name)
            return _fail_for_model(name)
        if path != CHAT_PATH:
            return Fail(404, message=f"Invalid URL ({record.method} {path})", code="")
        if record.method != "POST":
            return Fail(405, message=f"Invalid method for URL ({record.method} {path})")
        return _invalid(record, self.models, self.context_window)

    def _listed(self) -> list[str]:
        return self.models if self.models is not None else [DEFAULT_MODEL]


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 1_700_000_000, "owned_by": "standin"}


def _fail_for_model(name: str) -> Fail:
    return Fail(
        404,
        message=f"The model `{name}` does not exist or you do not have access to it.",
        code="model_not_found",
    )


def _invalid(record: StandInRequest, models: list[str] | None, window: int | None) -> Fail | None:
    """The 400 (or 404) the real API gives this chat body, or None when it is acceptable."""
    body = record.body
    if not isinstance(body, dict):
        return Fail(
            400,
            message="We could not parse the JSON body of your request. (HINT: This likely "
            "means you aren't using your HTTP library correctly. The OpenAI API expects a JSON "
            "payload, but what was sent was not valid JSON.)",
            code="",
        )
    if "messages" not in body:
        return Fail(
            400,
            message="Missing required parameter: 'messages'.",
            param="messages",
            code="missing_required_parameter",
        )
    messages = body["messages"]
    if not isinstance(messages, list):
        return Fail(
            400,
            message=f"Invalid type for 'messages': expected an array, but got "
            f"{_json_kind(messages)} instead.",
            param="messages",
            code="invalid_type",
        )
    if not messages:
        return Fail(
            400,
            message="Invalid 'messages': empty array. Expected an array with minimum length 1, "
            "but got an empty array instead.",
            param="messages",
            code="empty_array",
        )
    roles = {"system", "developer", "user", "assistant", "tool", "function"}
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in roles:
            return Fail(
                400,
                message=f"Invalid value for 'messages[{index}]': expected an object with a "
                f"role, one of {sorted(roles)}.",
                param=f"messages[{index}]",
                code="invalid_value",
            )
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return Fail(400, message="you must provide a model parameter", code="")
    if body.get("stream"):
        return Fail(400, message="stream is not supported by the LLM stand-in", param="stream")
    if models is not None and model not in models:
        return _fail_for_model(model)
    if window is not None:
        tokens = _prompt_tokens(record) + (record.max_tokens or 0)
        if tokens > window:
            return Fail(
                400,
                message=_CODES["context_length_exceeded"][1].format(window=window, tokens=tokens),
                param="messages",
                code="context_length_exceeded",
            )
    return None


def _json_kind(value: Any) -> str:
    kinds = {str: "a string", dict: "an object", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def _prompt_tokens(record: StandInRequest) -> int:
    return sum(estimate_tokens(_text_of(m.get("content"))) + 3 for m in record.messages)


def _error_body(fail: Fail, record: StandInRequest, window: int | None) -> dict[str, Any]:
    type_, code, message = _ERRORS.get(fail.status, ("server_error", None, "Error."))
    if fail.code and fail.code in _CODES:
        type_, message = _CODES[fail.code]
    if fail.code is not None:
        code = fail.code or None  # "" means null, where the real API sends null
    tokens = _prompt_tokens(record) + (record.max_tokens or 0)
    message = fail.message or message.format(
        model=record.model or DEFAULT_MODEL,
        tokens=tokens,
        window=window if window is not None else max(1, tokens // 2),
    )
    param = fail.param
    if param is None and code == "context_length_exceeded":
        param = "messages"
    return {
        "error": {
            "message": message,
            "type": fail.type or type_,
            "param": param,
            "code": code,
        }
    }


def _completion(record: StandInRequest, reply: Reply, answer_id: str) -> dict[str, Any]:
    content, finish = reply.content, reply.finish_reason
    limit = record.max_tokens
    if (
        content is not None
        and finish == "stop"
        and limit is not None
        and (estimate_tokens(content) > limit)
    ):
        content, finish = _cut(content, limit), "length"
    prompt = _prompt_tokens(record)
    completion = estimate_tokens(content or reply.refusal or "")
    usage = reply.usage
    if usage is _USAGE_AUTO:
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
    answer: dict[str, Any] = {
        "id": answer_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": record.model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": reply.refusal,
                    "annotations": [],
                    **reply.message_extra,
                },
                "logprobs": None,
                "finish_reason": finish,
                **reply.choice_extra,
            }
        ],
        "service_tier": "default",
        "system_fingerprint": None,
        **reply.extra,
    }
    if usage is not None:
        answer["usage"] = usage
    return answer


class _Handler(BaseHTTPRequestHandler):
    """One connection (HTTP/1.1, kept alive), its requests handed to `owner`."""

    owner: LlmStandIn
    _record: StandInRequest  # the request being answered
    _ended: bool  # whether its end is recorded
    protocol_version = "HTTP/1.1"
    server_version = "LlmStandIn/1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms wait between

    def setup(self) -> None:
        super().setup()
        with self.owner._changed:
            self.owner._connections[self.connection] = threading.current_thread()

    def finish(self) -> None:
        with suppress(OSError):
            super().finish()
        with self.owner._changed:
            self.owner._connections.pop(self.connection, None)

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        owner = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except (ValueError, UnicodeDecodeError):
            body = None
        record = StandInRequest(
            at=time.monotonic(),
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            raw=raw,
            body=body,
        )
        self._record = record
        self._ended = False
        owner._arrive(record)
        try:
            self._answer(record)
        except OSError:  # the client went away while it was being answered
            self.close_connection = True
            if self._ended:
                owner._amend(record, None, "gone")
        finally:
            if not self._ended:
                self._end(None, "gone")

    def _end(self, status: int | None, outcome: str) -> None:
        """Record how the request ended, before the client can see it (so a test that has
        its answer finds it recorded)."""
        self._ended = True
        self.owner._finish(self._record, status, outcome)

    def _answer(self, record: StandInRequest) -> None:
        owner = self.owner
        halt = owner._halt
        routed = owner._route(record)
        if isinstance(routed, dict):
            self._send_json(200, routed)
            return
        if routed is not None:
            self._send_fail(routed, record)
            return
        step, delay = owner._next_step()
        answer_id = owner._next_id()
        if step is None:
            step = self._answered(record)
        delay += getattr(step, "delay", 0.0)
        ended = self._wait(owner._gate.is_set, None, halt)
        if ended is None and delay > 0:
            ended = self._wait(lambda: False, time.monotonic() + delay, halt)
        if ended is None and isinstance(step, Hang):
            ended = self._wait(lambda: False, None, halt) or "cut"
        if ended is not None:
            self._end(None, ended)
            self.close_connection = True
        elif isinstance(step, Drop):
            self._end(None, "dropped")
            self._drop(step.reset)
        elif isinstance(step, Fail):
            self._send_fail(step, record)
        elif isinstance(step, Garbage):
            raw_body = step.body.encode() if isinstance(step.body, str) else step.body
            record.response = raw_body
            self._send(step.status, raw_body, step.content_type, {})
        elif isinstance(step, Reply):
            self._send_json(200, _completion(record, step, answer_id))
        elif isinstance(step, Flood):
            self._flood(step, record)

    def _answered(self, record: StandInRequest) -> Step:
        """The test's `answer` to the request; a 500 when it raises or gives no step (the
        fault is kept in `errors`, and raised when the stand-in stops)."""
        try:
            answered = self.owner.answer(record)
        except Exception as exc:
            self.owner.errors.append(exc)
            return Fail(500)
        if isinstance(answered, str):
            return Reply(answered)
        if isinstance(answered, Reply | Fail | Drop | Hang | Garbage | Flood):
            return answered
        self.owner.errors.append(TypeError(f"the answer is not a str or a step: {answered!r}"))
        return Fail(500)

    def _wait(
        self, ready: Callable[[], bool], deadline: float | None, halt: threading.Event
    ) -> str | None:
        """Wait until `ready()` or the deadline: None; or the client left ("gone") or the
        stand-in went down ("cut") first."""
        while not ready():
            if halt.is_set():
                return "cut"
            if deadline is not None and time.monotonic() >= deadline:
                return None
            if self._client_gone():
                return "gone"
            halt.wait(0.02)
        return None

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _drop(self, reset: bool) -> None:
        self.close_connection = True
        if reset:  # SO_LINGER 0: closing sends a RST (see _Server.shutdown_request)
            linger = struct.pack("ii", 1, 0)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            self.server.resets.add(self.connection)  # type: ignore[attr-defined]
            return
        with suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _flood(self, flood: Flood, record: StandInRequest) -> None:
        """Send `flood.size` bytes of a completion, until the client stops reading."""
        head = json.dumps(_completion(record, Reply("x"), "chatcmpl-flood")).encode()
        start, end = head.split(b'"x"', 1)
        start += b'"'
        end = b'"' + end
        filler = flood.size - len(start) - len(end)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if flood.declared:
            self.send_header("Content-Length", str(flood.size))
        self.send_header("Connection", "close")
        self._end(200, "answered")
        self.end_headers()
        self.close_connection = True
        chunk = b"a" * 65536
        for part in (start, *[chunk] * (filler // len(chunk)), chunk[: filler % len(chunk)], end):
            self.wfile.write(part)
            record.sent += len(part)

    def _send_fail(self, fail: Step, record: StandInRequest) -> None:
        assert isinstance(fail, Fail)
        headers = dict(fail.headers)
        if fail.retry_after is not None:
            value = fail.retry_after
            headers["Retry-After"] = str(int(value)) if value == int(value) else str(value)
        if fail.retry_after_ms is not None:
            headers["retry-after-ms"] = str(fail.retry_after_ms)
        self._send_json(fail.status, _error_body(fail, record, self.owner.context_window), headers)

    def _send_json(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        self._record.response = body
        payload = json.dumps(body, ensure_ascii=False).encode()
        self._send(status, payload, "application/json", headers or {})

    def _send(
        self, status: int, payload: bytes, content_type: str, headers: dict[str, str]
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-request-id", f"req_standin{id(payload):x}")
        self.send_header("openai-processing-ms", "1")
        for name, value in headers.items():
            self.send_header(name, value)
        self._end(status, "answered")
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()


@contextmanager
def llm_standin(
    *,
    api_key: str | None = None,
    models: Sequence[str] | None = None,
    context_window: int | None = None,
) -> Iterator[LlmStandIn]:
    """A started stand-in, stopped at the end: `with llm_standin() as llm: llm.base_url`."""
    with LlmStandIn(api_key=api_key, models=models, context_window=context_window) as standin:
        yield standin


def unused_base_url() -> str:
    """A base_url on a loopback port nobody listens on: the simplest endpoint that is down."""
    return f"http://127.0.0.1:{free_port()}/v1"
