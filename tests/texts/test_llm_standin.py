"""The LLM stand-in (tests/support/llm.py), driven by the official openai client (sync and
async): its answers, its errors and what the client makes of them (retries, Retry-After,
timeouts, connection errors), the fields reasoning models add, and what it records."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai import AsyncOpenAI, OpenAI
from openai.types.chat import ChatCompletionMessageParam
from support.llm import (
    DEFAULT_MODEL,
    Fail,
    LlmStandIn,
    Reply,
    StandInRequest,
    default_answer,
    estimate_tokens,
    fake_translation,
    llm_standin,
    unused_base_url,
)

ABSTRACT = (
    "We study sparse attention in long documents. Our method halves the memory it needs. "
    "It matches dense attention on three benchmarks. Code is released."
)


def post(llm: LlmStandIn, path: str, body: bytes) -> tuple[int, Any]:
    """POST a raw body (what the openai client would never send) and read the JSON answer."""
    connection = http.client.HTTPConnection("127.0.0.1", llm.port, timeout=5)
    try:
        connection.request("POST", path, body, {"Content-Type": "application/json"})
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def ask(text: str, *, system: str | None = None) -> list[ChatCompletionMessageParam]:
    messages: list[ChatCompletionMessageParam] = []
    if system:
        messages.append({"role": "system", "content": system})
    return [*messages, {"role": "user", "content": text}]


@pytest.fixture
def llm() -> Iterator[LlmStandIn]:
    with llm_standin() as standin:
        yield standin


@pytest.fixture
def client(llm: LlmStandIn) -> Iterator[OpenAI]:
    with OpenAI(base_url=llm.base_url, api_key="sk-test", timeout=5, max_retries=0) as made:
        yield made


def test_a_normal_answer_is_shaped_like_openais(llm: LlmStandIn, client: OpenAI) -> None:
    completion = client.chat.completions.create(
        model="qwen2.5:7b-instruct",
        messages=ask(f"Summarise this abstract in two sentences.\n\nAbstract: {ABSTRACT}"),
        temperature=0.2,
        max_tokens=300,
    )
    summary = "We study sparse attention in long documents. Our method halves the memory it needs."
    assert completion.id.startswith("chatcmpl-")
    assert completion.object == "chat.completion"
    assert completion.model == "qwen2.5:7b-instruct"
    assert len(completion.choices) == 1
    choice = completion.choices[0]
    assert (choice.index, choice.finish_reason, choice.logprobs) == (0, "stop", None)
    assert choice.message.role == "assistant"
    assert choice.message.content == summary
    assert choice.message.refusal is None
    usage = completion.usage
    assert usage is not None
    assert usage.completion_tokens == estimate_tokens(summary) == 14
    assert usage.prompt_tokens > usage.completion_tokens
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens

    (request,) = llm.requests
    assert (request.method, request.path, request.status, request.outcome) == (
        "POST",
        "/v1/chat/completions",
        200,
        "answered",
    )
    assert request.model == "qwen2.5:7b-instruct"
    assert (request.temperature, request.max_tokens) == (0.2, 300)
    assert request.header("Authorization") == "Bearer sk-test"
    assert request.retry_count == 0
    # The very body sent, field by field: what the real API sends, no more.
    sent = request.response
    assert set(sent) >= {"id", "object", "created", "model", "choices", "usage"}
    assert isinstance(sent["created"], int)
    assert sent["choices"][0]["message"]["refusal"] is None
    assert set(sent["choices"][0]) == {"index", "message", "finish_reason", "logprobs"}


def test_the_default_answer_is_predictable() -> None:
    def request(text: str, system: str | None = None) -> StandInRequest:
        body = {"model": "m", "messages": ask(text, system=system)}
        return StandInRequest(0.0, "POST", "/v1/chat/completions", {}, b"", body)

    summary = "We study sparse attention in long documents. Our method halves the memory it needs."
    assert default_answer(request(f"Summarize:\n\n{ABSTRACT}")) == summary
    title = "Sparse attention for long documents"
    chinese = default_answer(request(f"Translate this title into Chinese.\n\nTitle: {title}"))
    assert chinese == fake_translation(title, "zh")
    assert chinese.startswith("译：") and len(chinese) == 2 + len(title) // 3
    # The instruction may be the system message; the user message then is all payload.
    assert default_answer(request(ABSTRACT, system="Translate into Japanese.")) == (
        fake_translation(ABSTRACT, "ja")
    )
    assert fake_translation(ABSTRACT, "ja").startswith("訳：")
    assert fake_translation(title, "zh-Hant").startswith("譯：")
    assert fake_translation(title, "ko").startswith("번역: ")
    assert fake_translation("a b c", "de") == "[de] c b a"
    assert fake_translation("cab", "ru") == "[ru] ваб"
    # Different texts, different translations (a cache mixing them up shows).
    assert fake_translation("one text", "zh") != fake_translation("another text", "zh")
    both = default_answer(request(f"Summarise in German.\n\nAbstract: {ABSTRACT}"))
    assert both == fake_translation(summary, "de")
    translated = default_answer(
        request(f"Translate this summary to Simplified Chinese. Do not summarise.\n\n{ABSTRACT}")
    )
    assert translated == fake_translation(ABSTRACT, "zh-Hans") == fake_translation(ABSTRACT, "zh")
    assert default_answer(request("Hello there. How are you?")) == "Stand-in answer: Hello there."


def test_a_test_sets_the_answer_and_it_sees_each_request(llm: LlmStandIn, client: OpenAI) -> None:
    def answer(request: StandInRequest) -> str | Fail:
        if "refuse me" in request.user_text:
            return Fail(400, message="no", code="invalid_prompt")
        return f"{request.model}: {request.user_text.upper()}"

    llm.answer = answer
    done = client.chat.completions.create(model="small", messages=ask("hello"))
    assert done.choices[0].message.content == "small: HELLO"
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="small", messages=ask("refuse me"))
    assert refused.value.code == "invalid_prompt"
    assert [r.status for r in llm.requests] == [200, 400]


def test_a_429_with_retry_after_is_waited_out_by_the_client(llm: LlmStandIn) -> None:
    llm.fail_next(429, retry_after=1)
    with OpenAI(base_url=llm.base_url, api_key="sk-test", timeout=5, max_retries=1) as client:
        started = time.monotonic()
        done = client.chat.completions.create(model="m", messages=ask("hello"))
        waited = time.monotonic() - started
    assert done.choices[0].message.content == "Stand-in answer: hello"
    first, second = llm.requests
    assert (first.status, second.status) == (429, 200)
    assert (first.retry_count, second.retry_count) == (0, 1)
    assert second.at - first.at >= 0.95
    assert 0.95 <= waited < 3
    assert first.response["error"]["code"] == "rate_limit_exceeded"
    assert first.response["error"]["type"] == "requests"


def test_429s_that_outlast_the_retries_raise_rate_limit_errors(
    llm: LlmStandIn, client: OpenAI
) -> None:
    llm.fail_next(429, code="insufficient_quota")
    with pytest.raises(openai.RateLimitError) as quota:
        client.chat.completions.create(model="m", messages=ask("hello"))
    assert quota.value.status_code == 429
    assert quota.value.code == "insufficient_quota"
    assert quota.value.type == "insufficient_quota"
    assert "exceeded your current quota" in quota.value.message

    llm.fail_next(429, retry_after_ms=20, times=None)  # every request from now on
    with (
        OpenAI(base_url=llm.base_url, api_key="sk-test", max_retries=2) as retrying,
        pytest.raises(openai.RateLimitError),
    ):
        retrying.chat.completions.create(model="m", messages=ask("hello"))
    assert [r.retry_count for r in llm.requests[1:]] == [0, 1, 2]
    assert llm.requests[1].response["error"]["code"] == "rate_limit_exceeded"


def test_a_500_is_retried_and_a_503_that_stays_raises(llm: LlmStandIn) -> None:
    with OpenAI(base_url=llm.base_url, api_key="sk-test", timeout=5, max_retries=1) as client:
        llm.fail_next(500)  # the client's own backoff: about half a second
        done = client.chat.completions.create(model="m", messages=ask("hello"))
        assert done.choices[0].message.content == "Stand-in answer: hello"
        assert [r.status for r in llm.requests] == [500, 200]

        llm.fail_next(503, retry_after_ms=10, times=2)
        with pytest.raises(openai.InternalServerError) as unavailable:
            client.chat.completions.create(model="m", messages=ask("hello"))
    assert unavailable.value.status_code == 503
    assert unavailable.value.body == {
        "message": "The engine is currently overloaded, please try again later.",
        "type": "server_error",
        "param": None,
        "code": None,
    }
    assert llm.statuses == {500: 1, 200: 1, 503: 2}


def test_a_required_api_key_missing_or_wrong_is_a_401() -> None:
    with llm_standin(api_key="sk-right") as llm:
        with OpenAI(base_url=llm.base_url, api_key="sk-wrong-key-1234", max_retries=0) as wrong:
            with pytest.raises(openai.AuthenticationError) as refused:
                wrong.chat.completions.create(model="m", messages=ask("hello"))
            with pytest.raises(openai.AuthenticationError):
                wrong.models.list()
        assert refused.value.code == "invalid_api_key"
        assert "Incorrect API key provided: sk-********1234" in refused.value.message
        with OpenAI(base_url=llm.base_url, api_key="sk-right", max_retries=0) as right:
            assert right.chat.completions.create(model="m", messages=ask("hi")).choices
            llm.fail_next(401)  # scripted: a key revoked while running
            with pytest.raises(openai.AuthenticationError):
                right.chat.completions.create(model="m", messages=ask("hi"))
        # No Authorization header at all.
        status, bare = post(llm, "/v1/chat/completions", b'{"model": "m"}')
        assert status == 401
        assert "You didn't provide an API key" in bare["error"]["message"]
        assert [r.status for r in llm.requests] == [401, 401, 200, 401, 401]


def test_unknown_models_and_long_prompts_are_refused_like_the_real_api() -> None:
    with (
        llm_standin(models=["small", "large"], context_window=20) as llm,
        OpenAI(base_url=llm.base_url, api_key="k", max_retries=0) as client,
    ):
        assert [m.id for m in client.models.list()] == ["small", "large"]
        assert client.models.retrieve("large").id == "large"
        with pytest.raises(openai.NotFoundError) as missing:
            client.chat.completions.create(model="gpt-9", messages=ask("hello"))
        assert missing.value.code == "model_not_found"
        assert "`gpt-9` does not exist" in missing.value.message
        with pytest.raises(openai.BadRequestError) as long:
            client.chat.completions.create(model="small", messages=ask(ABSTRACT))
        assert long.value.code == "context_length_exceeded"
        assert "maximum context length is 20 tokens" in long.value.message
        llm.fail_next(400, code="context_length_exceeded")  # scripted, whatever the length
        with pytest.raises(openai.BadRequestError) as scripted:
            client.chat.completions.create(model="small", messages=ask("hi"))
        assert scripted.value.code == "context_length_exceeded"
    with (
        llm_standin() as llm,
        OpenAI(base_url=llm.base_url, api_key="k", max_retries=0) as client,
    ):
        assert [m.id for m in client.models.list()] == [DEFAULT_MODEL]


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        (b"{not json", None, "could not parse the JSON body"),
        (b'{"model": "m"}', "missing_required_parameter", "'messages'"),
        (b'{"model": "m", "messages": "hello"}', "invalid_type", "got a string"),
        (b'{"model": "m", "messages": []}', "empty_array", "empty array"),
        (b'{"model": "m", "messages": [{"content": "x"}]}', "invalid_value", "messages[0]"),
        (b'{"messages": [{"role": "user", "content": "x"}]}', None, "model parameter"),
        (b"[1, 2]", None, "could not parse"),
    ],
)
def test_invalid_bodies_get_an_openai_shaped_400(
    llm: LlmStandIn, body: bytes, code: str | None, says: str
) -> None:
    status, answer = post(llm, "/v1/chat/completions", body)
    assert status == 400
    error = answer["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["code"] == code
    assert says in error["message"]


def test_unknown_paths_are_404s(llm: LlmStandIn) -> None:
    status, answer = post(llm, "/v1/embeddings", b'{"input": "x"}')
    assert status == 404
    assert answer["error"]["message"] == "Invalid URL (POST /v1/embeddings)"


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=8,
    ),
    messages=st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "system", "assistant", "robot"])},
            optional={"content": st.text() | st.none() | st.lists(st.text(), max_size=2)},
        ),
        max_size=3,
    ),
)
def test_any_body_gets_a_completion_or_an_openai_shaped_400(
    llm: LlmStandIn, body: Any, messages: list[dict[str, Any]]
) -> None:
    for sent in (body, {"model": "m", "messages": messages}):
        status, answer = post(llm, "/v1/chat/completions", json.dumps(sent).encode())
        assert status in {200, 400}
        if status == 400:
            assert answer["error"]["type"] == "invalid_request_error"
        else:
            assert answer["object"] == "chat.completion"
    assert llm.errors == []


def test_a_slow_answer_times_out_and_a_hung_one_too(llm: LlmStandIn) -> None:
    llm.delay(2, times=1)
    with OpenAI(base_url=llm.base_url, api_key="k", timeout=0.3, max_retries=0) as client:
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(model="m", messages=ask("hello"))
        assert time.monotonic() - started < 1
        # The next answer is not delayed.
        assert client.chat.completions.create(model="m", messages=ask("hello")).choices
        llm.hang_next()
        with pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(model="m", messages=ask("hello"))
    llm.wait_for(lambda: llm.in_flight == 0)
    assert [(r.status, r.outcome) for r in llm.requests] == [
        (None, "gone"),
        (200, "answered"),
        (None, "gone"),
    ]


def test_a_slow_answer_within_the_timeout_arrives(llm: LlmStandIn) -> None:
    llm.respond_next("Late but here.", delay=0.3)
    with OpenAI(base_url=llm.base_url, api_key="k", timeout=2, max_retries=0) as client:
        started = time.monotonic()
        done = client.chat.completions.create(model="m", messages=ask("hello"))
    assert done.choices[0].message.content == "Late but here."
    assert time.monotonic() - started >= 0.3


def test_stopping_does_not_wait_for_a_hung_answer() -> None:
    failures: list[BaseException] = []
    llm = LlmStandIn().start()
    llm.hang_next()

    def call() -> None:
        with OpenAI(base_url=llm.base_url, api_key="k", timeout=30, max_retries=0) as client:
            try:
                client.chat.completions.create(model="m", messages=ask("hello"))
            except openai.APIConnectionError as exc:
                failures.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    llm.wait_for(lambda: llm.in_flight == 1)
    started = time.monotonic()
    llm.stop()
    assert time.monotonic() - started < 1
    caller.join(5)
    assert not caller.is_alive()
    assert len(failures) == 1  # the connection closed without an answer
    # Closing the connection may reach the waiting answer before the stop does (a loaded
    # machine): it ended without an answer either way.
    assert llm.requests[0].outcome in ("cut", "gone")


def test_an_endpoint_that_is_down_is_a_connection_error(llm: LlmStandIn) -> None:
    with (
        OpenAI(base_url=unused_base_url(), api_key="k", timeout=2, max_retries=0) as nowhere,
        pytest.raises(openai.APIConnectionError) as refused,
    ):
        nowhere.chat.completions.create(model="m", messages=ask("hello"))
    assert not isinstance(refused.value, openai.APITimeoutError)
    with OpenAI(base_url=llm.base_url, api_key="k", timeout=2, max_retries=0) as client:
        assert client.chat.completions.create(model="m", messages=ask("hello")).choices
        llm.down()  # the kept-alive connection closes too
        assert not llm.is_up
        with pytest.raises(openai.APIConnectionError):
            client.chat.completions.create(model="m", messages=ask("hello"))
        llm.up()
        assert client.chat.completions.create(model="m", messages=ask("hello")).choices
    assert [r.status for r in llm.requests] == [200, 200]


def test_a_dropped_connection_is_a_connection_error_the_client_retries(llm: LlmStandIn) -> None:
    with OpenAI(base_url=llm.base_url, api_key="k", timeout=2, max_retries=0) as client:
        llm.drop_next()
        with pytest.raises(openai.APIConnectionError):
            client.chat.completions.create(model="m", messages=ask("hello"))
        llm.drop_next(reset=True)
        with pytest.raises(openai.APIConnectionError):
            client.chat.completions.create(model="m", messages=ask("hello"))
    llm.drop_next()
    with OpenAI(base_url=llm.base_url, api_key="k", timeout=2, max_retries=1) as client:
        assert client.chat.completions.create(model="m", messages=ask("hello")).choices
    assert [r.outcome for r in llm.requests] == ["dropped", "dropped", "dropped", "answered"]


def test_what_reasoning_models_and_refusals_send_reaches_the_client(
    llm: LlmStandIn, client: OpenAI
) -> None:
    def message(**kwargs: Any) -> Any:
        return client.chat.completions.create(model="m", messages=ask("hi"), **kwargs).choices[0]

    llm.respond_next(None, refusal="I can't help with that.")
    refused = message()
    assert refused.message.content is None
    assert refused.message.refusal == "I can't help with that."

    llm.respond_next("The summary.", message_extra={"reasoning_content": "Let me think."})
    deepseek = message().message
    assert deepseek.content == "The summary."
    assert deepseek.model_extra == {"reasoning_content": "Let me think."}
    assert deepseek.reasoning_content == "Let me think."  # type: ignore[attr-defined]

    llm.respond_next("The summary.", message_extra={"reasoning": "Hmm."})
    assert message().message.model_extra == {"reasoning": "Hmm."}

    llm.respond_next("<think>\nThe user wants a summary.\n</think>\n\nThe summary.")
    assert message().message.content.startswith("<think>")  # type: ignore[union-attr]

    llm.respond_next("")
    assert message().message.content == ""

    llm.respond_next("The sum", finish_reason="length")
    assert message().finish_reason == "length"
    llm.respond_next("", finish_reason="content_filter")
    assert message().finish_reason == "content_filter"

    llm.respond_next("This is English, not Chinese.")
    assert message().message.content == "This is English, not Chinese."

    # max_tokens cuts a normal answer, as a model would.
    cut = message(max_tokens=3)
    assert (cut.message.content, cut.finish_reason) == ("Stand-in answer: hi", "stop")
    llm.respond_next("one two three four five")
    cut = message(max_completion_tokens=3)
    assert (cut.message.content, cut.finish_reason) == ("one two three", "length")

    llm.respond_next("Fine.", usage=None)  # some local servers send no usage
    completion = client.chat.completions.create(model="m", messages=ask("hi"))
    assert completion.usage is None


def test_a_body_that_is_not_a_completion_is_not_taken_for_one(
    llm: LlmStandIn, client: OpenAI
) -> None:
    # What the openai client does with them (the LLM client must expect both): a JSON
    # content type over a body that is not JSON raises a ValueError (json.JSONDecodeError,
    # not an openai error); another content type is handed back as a str.
    llm.garbage_next('{"id": "chatcmpl-1", "choices": [')
    with pytest.raises(ValueError):
        client.chat.completions.create(model="m", messages=ask("hi"))
    llm.garbage_next(content_type="text/html; charset=utf-8")
    got = client.chat.completions.create(model="m", messages=ask("hi"))
    assert not isinstance(got, openai.types.chat.ChatCompletion)
    llm.garbage_next(status=502, content_type="text/html")  # a proxy's page
    with pytest.raises(openai.InternalServerError) as proxy:
        client.chat.completions.create(model="m", messages=ask("hi"))
    assert proxy.value.status_code == 502


def test_the_most_requests_in_flight_is_recorded(llm: LlmStandIn) -> None:
    async def main(limit: int, papers: int) -> list[str | None]:
        gate = asyncio.Semaphore(limit)
        async with AsyncOpenAI(base_url=llm.base_url, api_key="k", max_retries=0) as client:

            async def one(index: int) -> str | None:
                async with gate:
                    done = await client.chat.completions.create(
                        model="m", messages=ask(f"Paper {index}.")
                    )
                    return done.choices[0].message.content

            calls = asyncio.gather(*(one(index) for index in range(papers)))
            await asyncio.to_thread(llm.wait_for, lambda: llm.in_flight == limit)
            await asyncio.sleep(0.1)  # no more come while they wait
            assert llm.in_flight == limit
            llm.release()
            return await calls

    llm.hold()
    answers = asyncio.run(main(limit=5, papers=5))
    assert answers == [f"Stand-in answer: Paper {index}." for index in range(5)]
    assert llm.max_in_flight == 5

    llm.reset()
    llm.hold()
    asyncio.run(main(limit=2, papers=6))
    assert llm.max_in_flight == 2
    assert len(llm.chat_requests) == 6


def test_scripted_steps_come_in_order_and_can_last(llm: LlmStandIn, client: OpenAI) -> None:
    llm.script(Reply("first"))
    llm.respond_next("second", times=2)
    llm.fail_next(500, times=None)
    got: list[Any] = []
    for _ in range(5):
        try:
            got.append(client.chat.completions.create(model="m", messages=ask("x")).choices[0])
        except openai.InternalServerError:
            got.append(None)
    assert [c.message.content if c else None for c in got] == [
        "first",
        "second",
        "second",
        None,
        None,
    ]
    llm.reset()
    assert client.chat.completions.create(model="m", messages=ask("x")).choices
    assert len(llm.requests) == 1


def test_an_answerer_that_fails_is_a_500_and_is_reported() -> None:
    with (
        pytest.raises(RuntimeError, match="the LLM stand-in failed"),
        llm_standin() as llm,
        OpenAI(base_url=llm.base_url, api_key="k", max_retries=0) as client,
    ):
        llm.answer = lambda request: json.loads("not json")
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="m", messages=ask("x"))
