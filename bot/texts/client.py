"""The one place paperbell talks to a model: any OpenAI-compatible chat completions endpoint
(a local Ollama, vLLM or llama.cpp server, or a hosted provider), through the official
`openai` client pointed at its `base_url`. No provider-specific code.

`TextClient.write(request)` asks for one text and gives a `Written` (the answer checked by
`bot.texts.answers`, and its tokens), or raises `TextFailure` with a reason people can act
on ("timeout", "unreachable", "rate limited", "refused", "wrong language"...). The client
retries what is worth retrying (429 with its Retry-After, 5xx, timeouts, dropped
connections), `max_retries` times; nothing here waits past `timeout` for one attempt.
What to ask, when, how often and within which budget is the caller's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import openai

from bot.core.errors import AnswerTooLarge
from bot.texts.answers import Unusable, clean_answer
from bot.texts.prompts import TextRequest, messages

__all__ = ["FATAL", "TextClient", "TextFailure", "TextModel", "Written"]

log = logging.getLogger(__name__)

# The most tokens an answer may take: a summary or a title is short, a translated abstract
# is not; a reasoning model's thinking counts too (and is thrown away).
MAX_TOKENS = {"summary": 1024, "title": 512}
DEFAULT_MAX_TOKENS = 3072
# The most an answer may bring: thousands of tokens are tens of KB; an endpoint sending
# more is broken or hostile, and is not read on.
MAX_ANSWER_BYTES = 1024 * 1024
# Failures that every request to this endpoint would meet alike: after one, a run asks no
# more (the rest of its papers go out with their abstracts).
FATAL = frozenset({"unreachable", "bad key", "no such model", "forbidden", "no quota"})
NO_KEY = "no-key"  # sent as the key to a server that takes none (a local one)


class TextFailure(Exception):
    """A text that could not be written, and why: `reason` is short and stable (counted in
    `status` and /metrics), `detail` says more (logged, shown by `paperbell summarize`).
    `calls`: the requests the endpoint got for it, retries included (the budget's)."""

    def __init__(self, reason: str, detail: str = "", *, calls: int = 1) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        self.calls = calls


@dataclass(frozen=True, slots=True)
class Written:
    """A text a model wrote, checked, and what it cost (`calls`: the requests the
    endpoint got for it, retries included)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    calls: int = 1


class TextClient:
    """An OpenAI-compatible endpoint and model. Use as an async context manager (it holds an
    HTTP connection pool), or call `close()`."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float = 0.2,
        capped_client: Callable[[int], Any] | None = None,
    ) -> None:
        self.model = model
        self.temperature = temperature
        self._token_field = "max_tokens"
        import openai  # here, not at the top: ~50 MB and half a second, for runs that ask no model

        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or NO_KEY,
            timeout=timeout,
            max_retries=max_retries,
            # An HTTP client that reads no answer past its cap (None: the openai client's own).
            http_client=capped_client(MAX_ANSWER_BYTES) if capped_client else None,
        )

    async def __aenter__(self) -> TextClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._client.close()

    async def write(self, request: TextRequest, *, timeout: float | None = None) -> Written:
        """The text `request` asks for, checked; TextFailure when there is none to show.
        `timeout` bounds each attempt (default: the client's)."""
        started = time.monotonic()
        completion, calls = await self._complete(request, timeout)
        try:
            return self._checked(completion, request, started, calls)
        except TextFailure as exc:
            exc.calls = calls
            raise

    def _checked(
        self, completion: Any, request: TextRequest, started: float, calls: int
    ) -> Written:
        """The text of a completion, checked; TextFailure when there is none to show."""
        try:
            choice = completion.choices[0]
            message = choice.message
            content = message.content
        except (AttributeError, IndexError, TypeError):
            raise TextFailure("bad answer", "the answer is no chat completion") from None
        if not isinstance(content, str | None):
            raise TextFailure("bad answer", "the answer's content is no text")
        if choice.finish_reason == "content_filter":
            raise TextFailure("refused", "the endpoint's content filter stopped the answer")
        if message.refusal:
            raise TextFailure("refused", _short(message.refusal))
        if choice.finish_reason == "length":
            raise TextFailure("cut off", "the answer ran past its token limit")
        try:
            text = clean_answer(content, request)
        except Unusable as exc:
            raise TextFailure(exc.reason, exc.detail) from None
        usage = completion.usage
        return Written(
            text=text,
            prompt_tokens=_tokens(usage, "prompt_tokens"),
            completion_tokens=_tokens(usage, "completion_tokens"),
            seconds=time.monotonic() - started,
            calls=calls,
        )

    async def _complete(self, request: TextRequest, timeout: float | None) -> tuple[Any, int]:
        """The completion, and the requests the endpoint got for it: the client's own
        retries and the second try below included, as each costs the day's budget.
        TextFailure, with its calls, when there is none."""
        import openai  # here, not at the top: ~50 MB and half a second, for runs that ask no model

        limit = MAX_TOKENS.get(request.kind, DEFAULT_MAX_TOKENS)
        options: dict[str, Any] = {self._token_field: limit}
        if timeout is not None:
            options["timeout"] = timeout
        calls = 0
        try:
            try:
                answer = await self._ask(request, options)
            except openai.BadRequestError as exc:
                # Newer OpenAI models take max_completion_tokens only: asked once more so
                # (this request, whatever the others sent at the same time).
                if "max_tokens" not in options or "max_tokens" not in str(exc.message):
                    raise
                calls += _calls(exc)
                self._token_field = "max_completion_tokens"
                options["max_completion_tokens"] = options.pop("max_tokens")
                answer = await self._ask(request, options)
        except (openai.OpenAIError, ValueError, AnswerTooLarge) as exc:
            raise _failure(exc, calls=calls + _calls(exc)) from None
        calls += answer.retries_taken + 1
        try:
            return answer.parse(), calls
        except (openai.OpenAIError, ValueError) as exc:  # a body that is not JSON
            raise _failure(exc, calls=calls) from None

    async def _ask(self, request: TextRequest, options: dict[str, Any]) -> Any:
        """The client's answer, raw: it says how many retries it took (`retries_taken`)."""
        return await self._client.chat.completions.with_raw_response.create(
            model=self.model,
            messages=messages(request),  # type: ignore[arg-type]
            temperature=self.temperature,
            **options,
        )


def _calls(exc: Exception) -> int:
    """The requests a failed call made: its last one carries the client's retry count."""
    request = getattr(exc, "request", None)
    retries = request.headers.get("x-stainless-retry-count", "0") if request is not None else "0"
    return int(retries) + 1 if retries.isdigit() else 1


def _failure(exc: Exception, *, calls: int) -> TextFailure:
    """What a call that failed in the client (or a body it could not read) means."""
    import openai

    failure: TextFailure
    if isinstance(exc, openai.APITimeoutError):
        failure = TextFailure("timeout", "no answer in time")
    elif isinstance(exc, openai.APIConnectionError):
        failure = TextFailure("unreachable", _short(str(exc.__cause__ or exc)))
    elif isinstance(exc, openai.APIStatusError):
        failure = _status_failure(exc)
    elif isinstance(exc, openai.APIResponseValidationError):
        failure = TextFailure("bad answer", _short(str(exc)))
    elif isinstance(exc, openai.OpenAIError):
        failure = TextFailure("error", _short(str(exc)))
    elif isinstance(exc, AnswerTooLarge):
        failure = TextFailure("too large", str(exc))
    else:  # a body that is not JSON (an HTML error page, cut off)
        failure = TextFailure("bad answer", f"not JSON: {_short(str(exc), 100)}")
    failure.calls = calls
    return failure


def _status_failure(exc: openai.APIStatusError) -> TextFailure:
    """A refused request's failure, by its status and the error body's code."""
    status = exc.status_code
    code = str(getattr(exc, "code", None) or "")
    said = _short(str(exc.message))
    if status == 401:
        return TextFailure("bad key", f"HTTP 401: {said}")
    if status == 403:
        return TextFailure("forbidden", f"HTTP 403: {said}")
    if status == 404:
        return TextFailure("no such model", f"HTTP 404: {said}")
    if status == 429:
        if code == "insufficient_quota":
            return TextFailure("no quota", f"HTTP 429: {said}")
        return TextFailure("rate limited", f"HTTP 429: {said}")
    if status >= 500:
        return TextFailure("server error", f"HTTP {status}: {said}")
    return TextFailure("bad request", f"HTTP {status}: {said}")


def _tokens(usage: Any, name: str) -> int:
    value = getattr(usage, name, 0) if usage is not None else 0
    return value if isinstance(value, int) and value >= 0 else 0


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "…"


@dataclass(frozen=True)
class TextModel:
    """The model that writes a run's texts, and how a run may use it: the endpoint and
    model, `concurrency` requests at once, at most `max_requests_per_day` (None: no budget),
    all within `deadline_seconds`. Made once at start; each run opens its own client."""

    base_url: str
    model: str
    api_key: str | None = None
    api_key_env: str | None = None  # where the key is read from: named when it is not set
    timeout: float = 60.0
    max_retries: int = 2
    temperature: float = 0.2
    concurrency: int = 4
    max_requests_per_day: int | None = None
    deadline_seconds: float = 90.0
    capped_client: Callable[[int], Any] | None = None  # makes HTTP clients with a size cap

    def open(self) -> TextClient:
        """A client for one run (it holds connections: close it)."""
        return TextClient(
            base_url=self.base_url,
            model=self.model,
            api_key=self.api_key,
            timeout=self.timeout,
            max_retries=self.max_retries,
            temperature=self.temperature,
            capped_client=self.capped_client,
        )
