"""Summaries and translations for the digests going out (`bot.pipeline.texts`), against the
stand-in of the OpenAI chat completions API on loopback, through the official `openai`
client and a real store: each text asked once and kept (across subscribers and runs), the
budget, concurrency, the run's deadline, and every failure path falling back to the
abstract with a note, counted for `status` and /metrics."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.demo_mail import demo_papers
from support.llm import DEFAULT_MODEL, LlmStandIn, Reply, llm_standin, unused_base_url
from support.servers import ForwardProxy, forward_proxy
from support.webhooks import json_values as any_json

from bot.config import Config, parse_config
from bot.core.models import HUGGING_FACE, Digest, DigestGroup, DigestItem, Paper, Subscriber
from bot.pipeline.texts import TextsRun, write_texts
from bot.pipeline.wiring import text_model
from bot.store import Store
from bot.texts.prompts import summary_request

NOW = datetime(2026, 11, 25, 8, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(f"sqlite:///{tmp_path / 'texts.sqlite'}") as opened:
        yield opened


@pytest.fixture
def llm() -> Iterator[LlmStandIn]:
    with llm_standin() as standin:
        yield standin


@pytest.fixture(scope="module")
def papers() -> list[Paper]:
    """Four real papers (the demo's Hugging Face day), without Hugging Face's summaries."""
    return [replace(p, ai_summary=None) for p in demo_papers() if p.abstract][:4]


def config(base_url: str | None, *, environ: dict[str, str] | None = None, **llm: Any) -> Config:
    data: dict[str, Any] = {"version": 1}
    if base_url is not None:
        data["llm"] = {
            "base_url": base_url,
            "model": DEFAULT_MODEL,
            "timeout": 5,
            "max_retries": 1,
            **llm,
        }
    return parse_config(data, environ=environ or {})


def digest(name: str, papers: Sequence[Paper], **settings: Any) -> Digest:
    sub = Subscriber(name=name, email=f"{name}@example.org", rules=("x",), **settings)
    items = tuple(DigestItem(p, ("x",), ()) for p in papers)
    return Digest(sub, f"digest-{name}", NOW, (DigestGroup("x", items),))


def write(
    cfg: Config, store: Store, digests: Sequence[Digest], *, ask: bool = True
) -> tuple[list[Digest], TextsRun]:
    return asyncio.run(write_texts(text_model(cfg), store, digests, now=NOW, ask=ask))


def test_each_text_is_asked_once_for_every_subscriber_and_kept_for_the_next_runs(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    cfg = config(llm.base_url)
    digests = [
        digest("ada", papers, summaries=True),
        digest("bea", papers[:2], summaries=True),
        digest("chen", papers, language="zh"),
        digest("dana", papers, summaries=True, language="zh"),
        digest("eli", papers),
    ]
    done, run = write(cfg, store, digests)
    # 4 summaries; 4 titles in Chinese; 4 summaries in Chinese (dana); 4 abstracts (chen)
    assert len(llm.chat_requests) == 16
    asked = [(r.system_text, r.user_text) for r in llm.chat_requests]
    assert len(set(asked)) == 16  # none twice
    assert (run.written, run.cached, run.missing) == (16, 0, 0)
    ada, bea, chen, dana, eli = done
    for paper in papers:
        texts = ada.texts[paper.id]
        assert texts.summary and texts.summary_by == DEFAULT_MODEL
        assert texts.summary in paper.abstract.replace("\n", " ") or texts.summary.endswith("…")
        assert (texts.title, texts.text, texts.language) == (None, None, None)
        chinese = chen.texts[paper.id]
        assert chinese.summary is None and chinese.language == "zh"
        assert chinese.title and chinese.title.startswith("译：")
        assert chinese.text and chinese.text.startswith("译：")
        both = dana.texts[paper.id]
        assert both.summary == texts.summary and both.text and both.text != chinese.text
    assert bea.texts[papers[0].id] == ada.texts[papers[0].id]
    assert eli.texts == {} and eli is digests[4]  # asked for nothing: unchanged
    assert all(d.texts_note is None for d in done)

    again, run = write(cfg, store, digests)  # tomorrow's run, a preview: all stored
    assert len(llm.chat_requests) == 16
    assert (run.written, run.cached) == (0, 16)
    assert [d.texts for d in again] == [d.texts for d in done]
    preview, run = write(cfg, store, [digest("fay", papers, summaries=True)], ask=False)
    assert len(llm.chat_requests) == 16 and run.cached == 4
    assert all(t.summary for t in preview[0].texts.values())

    (day,) = store.texts.day(NOW.date())
    assert (day.requests, day.written, day.cached, day.failed) == (16, 16, 20, 0)
    assert day.prompt_tokens > 0 and day.completion_tokens > 0


def test_a_preview_asks_no_model_and_says_so(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    done, run = write(
        config(llm.base_url), store, [digest("ada", papers, summaries=True)], ask=False
    )
    assert llm.chat_requests == []
    assert run.not_asked == 4 and "4 not written yet (a preview asks no model)" in (
        run.line() or ""
    )
    assert all(t.summary is None for t in done[0].texts.values())


def test_without_llm_a_summary_is_hugging_faces_and_nothing_is_translated(
    store: Store, papers: list[Paper]
) -> None:
    hf = replace(papers[0], ai_summary="  A policy that learns\nfrom few demos.  ")
    done, run = write(
        config(None), store, [digest("ada", [hf, papers[1]], summaries=True, language="zh")]
    )
    texts = done[0].texts
    assert texts[hf.id].summary == "A policy that learns from few demos."
    assert texts[hf.id].summary_by == HUGGING_FACE
    assert texts[papers[1].id].summary is None  # the abstract, as today
    assert texts[hf.id].title is None and done[0].texts_note is None
    assert run.line() == "summaries: 1 from Hugging Face (no [llm] is set up)"


def test_a_failed_summary_falls_back_to_hugging_face_then_to_the_abstract(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    hf = replace(papers[0], ai_summary="Hugging Face's own summary.")
    llm.fail_next(500, times=None)
    done, run = write(config(llm.base_url), store, [digest("ada", [hf, papers[1]], summaries=True)])
    texts = done[0].texts
    assert (texts[hf.id].summary, texts[hf.id].summary_by) == (
        "Hugging Face's own summary.",
        HUGGING_FACE,
    )
    assert texts[papers[1].id].summary is None
    assert run.failed == {"server error": 2}
    assert done[0].texts_note == (
        "1 summary could not be written this time: that paper shows its abstract."
    )
    assert len(llm.chat_requests) == 4  # each asked twice (max_retries = 1)
    request = summary_request(hf)
    assert request is not None
    assert store.texts.get([(request.key, request.source_hash)], DEFAULT_MODEL) == {}


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ({"content": ""}, "empty"),
        ({"content": None, "refusal": "I can't help with that."}, "refused"),
        ({"content": "Half a sum", "finish_reason": "length"}, "cut off"),
        ({"content": "", "finish_reason": "content_filter"}, "refused"),
        ({"content": "<think>The user wants a summary, so I will"}, "thinking only"),
        ({"content": "本文提出了一种新的扩散策略。"}, "wrong language"),
        ({"content": "It works. " * 300}, "too long"),
    ],
)
def test_an_answer_that_cannot_be_shown_is_not_kept_and_is_asked_again_next_run(
    llm: LlmStandIn, store: Store, papers: list[Paper], script: dict[str, Any], reason: str
) -> None:
    llm.respond_next(**script)
    cfg = config(llm.base_url)
    done, run = write(cfg, store, [digest("ada", papers[:1], summaries=True)])
    assert run.failed == {reason: 1} and done[0].texts[papers[0].id].summary is None
    assert done[0].texts_note and "1 summary could not be written" in done[0].texts_note
    done, run = write(cfg, store, [digest("ada", papers[:1], summaries=True)])  # next run
    assert run.written == 1 and done[0].texts[papers[0].id].summary


def test_a_models_thinking_never_reaches_a_reader(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    llm.respond_next("<think>Chinese? No: English.</think>It learns to grasp.")
    llm.respond_next(
        "It plans with diffusion.", message_extra={"reasoning_content": "SECRET THOUGHTS"}
    )
    llm.respond_next("It adapts.", message_extra={"reasoning": "MORE THOUGHTS"})
    done, run = write(
        config(llm.base_url, concurrency=1), store, [digest("ada", papers[:3], summaries=True)]
    )
    summaries = [done[0].texts[p.id].summary for p in papers[:3]]
    assert summaries == ["It learns to grasp.", "It plans with diffusion.", "It adapts."]
    assert run.written == 3


def test_429_is_waited_out_as_retry_after_says(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    llm.fail_next(429, retry_after=1, code="rate_limit_exceeded")
    started = time.monotonic()
    _, run = write(config(llm.base_url), store, [digest("ada", papers[:1], summaries=True)])
    assert time.monotonic() - started >= 0.9
    assert run.written == 1 and run.failed == {}
    assert [r.status for r in llm.chat_requests] == [429, 200]


def test_a_refused_key_stops_asking_for_the_rest_of_the_run(
    store: Store, papers: list[Paper]
) -> None:
    with llm_standin(api_key="sk-right") as llm:
        cfg = config(
            llm.base_url, api_key_env="LLM_KEY", concurrency=1, environ={"LLM_KEY": "sk-wrong"}
        )
        done, run = write(cfg, store, [digest("ada", papers, summaries=True, language="ja")])
    assert len(llm.chat_requests) == 1  # 401 is not retried, and nothing more is asked
    assert run.failed == {"bad key": 12}
    assert "HTTP 401" in (run.last_error or "") and "sk-wrong" not in (run.line() or "")
    assert done[0].texts_note == (
        "4 summaries could not be written this time: those papers show their abstracts. "
        "The Japanese translation is missing for 4 papers."
    )


def test_a_key_that_is_not_set_asks_nothing(store: Store, papers: list[Paper]) -> None:
    with llm_standin() as llm:
        cfg = config(llm.base_url, api_key_env="LLM_KEY")
        _, run = write(cfg, store, [digest("ada", papers[:2], summaries=True)])
    assert llm.chat_requests == [] and run.failed == {"no key": 2}
    assert "LLM_KEY" in (run.last_error or "")


def test_the_budget_is_shared_by_the_days_runs_and_says_when_it_ran_out(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    cfg = config(llm.base_url, max_requests_per_day=3, concurrency=1)
    done, run = write(cfg, store, [digest("ada", papers, summaries=True)])
    assert len(llm.chat_requests) == 3 and run.written == 3 and run.over_budget == 1
    assert "1 over today's budget" in (run.line() or "")
    assert sum(1 for t in done[0].texts.values() if t.summary) == 3
    _, run = write(cfg, store, [digest("bea", papers, summaries=True)])  # the same day
    assert len(llm.chat_requests) == 3 and (run.cached, run.over_budget) == (3, 1)
    (day,) = store.texts.day(NOW.date())
    assert (day.requests, day.over_budget) == (3, 2)


def test_the_budget_counts_every_call_the_client_makes_its_retries_too(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    llm.fail_next(503, times=4)  # the first text: three calls, all refused; the second: two
    cfg = config(llm.base_url, max_retries=2, max_requests_per_day=5, concurrency=1)
    _, run = write(cfg, store, [digest("ada", papers, summaries=True)])
    assert [r.status for r in llm.chat_requests] == [503, 503, 503, 503, 200]
    assert (run.written, run.failed, run.over_budget) == (1, {"server error": 1}, 2)
    (day,) = store.texts.day(NOW.date())
    assert day.requests == len(llm.chat_requests) == 5

    from bot.cli.reports import Status, texts_lines
    from bot.store import Workers

    found = Status(NOW, [], [], {}, store.texts.day(NOW.date()), Workers(None, ()))
    assert f"{DEFAULT_MODEL}: 5 requests of 5 allowed" in "\n".join(texts_lines(cfg, found))


def test_concurrency_bounds_the_requests_at_once(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    llm.delay(0.2)
    cfg = config(llm.base_url, concurrency=2)
    _, run = write(cfg, store, [digest("ada", papers, summaries=True, language="de")])
    assert run.written == 12
    assert llm.max_in_flight == 2


def test_the_runs_deadline_sends_the_digest_on_time_with_abstracts(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    llm.hang_next(times=None)
    cfg = config(llm.base_url, deadline_seconds=2, timeout=30)
    started = time.monotonic()
    done, run = write(cfg, store, [digest("ada", papers, summaries=True)])
    assert time.monotonic() - started < 5
    assert run.failed == {"deadline": 4}
    assert all(t.summary is None for t in done[0].texts.values())


def test_an_endpoint_that_is_down_costs_one_attempt_not_one_per_paper(
    store: Store, papers: list[Paper]
) -> None:
    cfg = config(unused_base_url(), concurrency=1)
    started = time.monotonic()
    done, run = write(cfg, store, [digest("ada", papers, summaries=True, language="zh")])
    assert time.monotonic() - started < 10
    assert run.failed == {"unreachable": 12}
    assert "unreachable" in (run.line() or "")
    assert done[0].texts_note and "篇总结这次未能生成" in done[0].texts_note  # in Chinese


def test_each_answer_is_asked_for_as_the_model_answers_it(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    def answer(request: Any) -> Any:
        if "Chinese" in request.system_text and request.user_text == papers[0].title:
            return Reply("Not Chinese at all")  # the title's translation is refused
        from support.llm import default_answer

        return default_answer(request)

    llm.answer = answer
    done, run = write(config(llm.base_url), store, [digest("chen", papers[:2], language="zh")])
    assert run.failed == {"wrong language": 1}
    assert done[0].texts[papers[0].id].title is None
    assert done[0].texts[papers[0].id].text  # its abstract's translation is shown
    assert done[0].texts_note == "有 1 篇论文缺少中文译文。"  # the reader's language
    body = llm.chat_requests[0].body
    assert body["model"] == DEFAULT_MODEL and body["temperature"] == 0.2
    assert body["messages"][0]["role"] == "system" and "max_tokens" in body


@pytest.mark.parametrize(
    "body",
    [
        "<html><body><h1>502 Bad Gateway</h1></body></html>",
        '{"id": "chatcmpl-1", "choices": [',
        '{"hello": "world"}',
        "[1, 2, 3]",
        '{"choices": [{"message": {"content": 42}, "finish_reason": "stop"}]}',
        '{"choices": "none"}',
    ],
)
def test_a_body_that_is_no_chat_completion_is_a_bad_answer(
    llm: LlmStandIn, store: Store, papers: list[Paper], body: str
) -> None:
    llm.garbage_next(body)
    llm.garbage_next(body, content_type="text/html")  # a proxy's page: the client gives a str
    cfg = config(llm.base_url, concurrency=1)
    done, run = write(cfg, store, [digest("ada", papers[:2], summaries=True)])
    assert run.failed == {"bad answer": 2}
    assert done[0].texts[papers[0].id].summary is None


json_values = any_json(text=50, leaves=20, nan=False)
hostile_bodies = st.one_of(
    st.binary(max_size=2000),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {
            "choices": st.lists(
                st.fixed_dictionaries({"message": json_values, "finish_reason": json_values}),
                max_size=2,
            )
        },
        optional={"usage": json_values, "id": json_values},
    ).map(lambda v: json.dumps(v).encode()),
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=hostile_bodies, content=st.text(max_size=500))
@example(body=b"\x00" * 100, content="\x00")
@example(body=json.dumps({"choices": [{"message": {"content": "x" * 10}}]}).encode(), content="")
def test_whatever_the_endpoint_answers_the_digest_is_built(
    llm: LlmStandIn, store: Store, papers: list[Paper], body: bytes, content: str
) -> None:
    llm.reset()
    llm.garbage_next(body)
    llm.respond_next(content)
    cfg = config(llm.base_url, max_retries=0, concurrency=1)
    done, run = write(cfg, store, [digest("ada", papers[:2], summaries=True)])
    assert run.written + sum(run.failed.values()) + run.cached == 2
    for texts in done[0].texts.values():
        assert texts.summary is None or (texts.summary and "\x00" not in texts.summary)


def test_status_and_metrics_count_todays_requests_failures_and_tokens(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from bot.web.app import text_metrics

    llm.fail_next(503, times=2)  # the first summary: asked twice (two of the budget's three)
    cfg = config(llm.base_url, concurrency=1, max_requests_per_day=3)
    write(cfg, store, [digest("ada", papers, summaries=True)])

    class Today:
        def collect(self) -> Any:
            return text_metrics(store.texts.day(NOW.date()))

    registry = CollectorRegistry()
    registry.register(Today())  # type: ignore[arg-type]
    scraped = generate_latest(registry).decode()
    model = f'model="{DEFAULT_MODEL}"'
    assert f"paperbell_llm_requests_today{{{model}}} 3.0" in scraped
    assert f"paperbell_llm_texts_written_today{{{model}}} 1.0" in scraped
    assert f"paperbell_llm_texts_over_budget_today{{{model}}} 2.0" in scraped
    assert f'paperbell_llm_texts_failed_today{{{model},reason="server error"}} 1.0' in scraped
    assert "paperbell_llm_completion_tokens_today" in scraped

    from bot.cli.reports import Status, texts_lines
    from bot.store import Workers

    found = Status(NOW, [], [], {}, store.texts.day(NOW.date()), Workers(None, ()))
    lines = "\n".join(texts_lines(cfg, found))
    assert (
        f"{DEFAULT_MODEL}: 3 requests of 3 allowed, 1 written, 0 already stored, "
        "1 failed (server error: 1)" in lines
    )
    assert "the budget ran out (max_requests_per_day): 2 texts not asked for" in lines
    assert "last error at 08:00 UTC: server error: HTTP 503" in lines


@pytest.mark.parametrize("declared", [False, True])
def test_an_answer_past_its_size_cap_is_not_read(
    llm: LlmStandIn, store: Store, papers: list[Paper], declared: bool
) -> None:
    llm.flood_next(64 * 1024 * 1024, declared=declared)
    _, run = write(config(llm.base_url), store, [digest("ada", papers[:1], summaries=True)])
    (asked,) = llm.chat_requests  # not asked again: another try would cost as much
    assert run.failed == {"too large": 1}, run.line()
    assert asked.sent < 16 * 1024 * 1024  # reading stopped at the cap


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[ForwardProxy]:
    """A forward proxy on loopback that HTTP_PROXY names, as on a university's network, and
    no other proxy setting from the environment the tests run in."""
    for name in [name for name in os.environ if name.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
    with forward_proxy() as forwarding:
        monkeypatch.setenv("HTTP_PROXY", forwarding.url)
        yield forwarding


def test_a_summary_is_asked_through_the_proxy_the_environment_names(
    llm: LlmStandIn, store: Store, papers: list[Paper], proxy: ForwardProxy
) -> None:
    _, run = write(config(llm.base_url), store, [digest("ada", papers[:1], summaries=True)])
    assert run.written == 1, run.line()
    assert proxy.forwarded == [("POST", f"{llm.base_url}/chat/completions")]


def test_a_host_in_no_proxy_is_asked_directly(
    llm: LlmStandIn,
    store: Store,
    papers: list[Paper],
    proxy: ForwardProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NO_PROXY", "models.example.org, 127.0.0.1")
    _, run = write(config(llm.base_url), store, [digest("ada", papers[:1], summaries=True)])
    assert run.written == 1, run.line()
    assert len(llm.chat_requests) == 1 and proxy.forwarded == []


def test_a_stored_tag_that_is_no_tag_is_no_translation_and_no_crash(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    done, run = write(
        config(llm.base_url), store, [digest("ada", papers[:1], summaries=True, language="!!x")]
    )
    assert len(llm.chat_requests) == 1  # its summary only
    texts = done[0].texts[papers[0].id]
    assert texts.summary and (texts.language, texts.title, texts.text) == (None, None, None)
    assert done[0].texts_note is None and run.written == 1


def test_a_model_that_takes_max_completion_tokens_only_is_asked_so(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    llm.fail_next(
        400,
        message="Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        code="unsupported_parameter",
        param="max_tokens",
    )
    llm.delay(0.2, times=4)  # the first requests of the run are in flight together
    cfg = config(llm.base_url, concurrency=4)
    _, run = write(cfg, store, [digest("ada", papers, summaries=True)])
    assert run.written == 4 and run.failed == {}
    asked = [r.body for r in llm.chat_requests]
    assert "max_tokens" in asked[0] and "max_completion_tokens" not in asked[0]
    assert "max_completion_tokens" in asked[-1] and "max_tokens" not in asked[-1]
    (day,) = store.texts.day(NOW.date())
    assert day.requests == len(llm.chat_requests) == 5  # the second try is charged too


def test_two_runs_at_once_show_one_summary_and_its_own_translation(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    """A daemon's tick and `paperbell digest` at the same moment: each asks for the same
    summary; whichever is kept first is the one both digests show, and the translation
    beside it is of that summary, never of the other."""
    from support.llm import default_answer

    answers = iter(["Alpha: it learns to grasp.", "Beta: it plans with diffusion."])

    def answer(request: Any) -> Any:
        if "summaries" in request.system_text:
            return Reply(next(answers), delay=0.2)
        return default_answer(request)

    llm.answer = answer
    cfg = config(llm.base_url)
    model = text_model(cfg)

    async def both() -> list[tuple[list[Digest], TextsRun]]:
        return await asyncio.gather(
            write_texts(
                model, store, [digest("ada", papers[:1], summaries=True, language="zh")], now=NOW
            ),
            write_texts(
                model, store, [digest("bea", papers[:1], summaries=True, language="zh")], now=NOW
            ),
        )

    (ada, _), (bea, _) = asyncio.run(both())
    shown = {d[0].texts[papers[0].id].summary for d in (ada, bea)}
    assert len(shown) == 1  # one summary, whichever was kept first
    (summary,) = shown
    translations = [r for r in llm.chat_requests if r.user_text == summary]
    assert translations and all(
        r.user_text == summary
        for r in llm.chat_requests
        if "Translate the paragraph" in r.system_text
    )
    later, _ = write(cfg, store, [digest("cy", papers[:1], summaries=True, language="zh")])
    assert later[0].texts[papers[0].id] == ada[0].texts[papers[0].id]


def test_a_text_written_from_another_source_is_not_shown(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    cfg = config(llm.base_url)
    write(cfg, store, [digest("ada", papers[:1], language="de")])
    fixed = replace(papers[0], abstract=papers[0].abstract + " We also release the code.")
    done, run = write(cfg, store, [digest("ada", [fixed], language="de")])
    assert (run.cached, run.written) == (1, 1)  # the title's kept; the abstract's written anew
    assert done[0].texts[fixed.id].text == "[de] " + " ".join(reversed(fixed.abstract.split()))


def test_a_paper_without_an_abstract_is_not_summarised(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    bare = replace(papers[0], abstract="")
    done, run = write(
        config(llm.base_url), store, [digest("ada", [bare], summaries=True, language="zh")]
    )
    assert [r.user_text for r in llm.chat_requests] == [bare.title]  # its title only
    texts = done[0].texts[bare.id]
    assert texts.summary is None and texts.text is None and texts.title
    assert run.failed == {} and done[0].texts_note is None  # nothing failed


def test_a_store_that_fails_costs_the_texts_not_the_digests(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    from sqlalchemy import text

    with store.database.engine.begin() as connection:
        connection.execute(text("DROP TABLE llm_day"))  # the budget cannot be counted
    digests = [digest("ada", papers, summaries=True)]
    done, run = write(config(llm.base_url), store, digests)
    assert run.failed == {"store": 4} and llm.chat_requests == []
    assert all(t.summary is None for t in done[0].texts.values())
    with store.database.engine.begin() as connection:
        connection.execute(text("DROP TABLE paper_text"))  # nothing can be read either
    done, run = write(config(llm.base_url), store, digests)
    assert done == digests and run.failed == {"store": 1}


@pytest.mark.database
def test_the_store_keeps_texts_and_the_days_figures_on_either_database(database_url: str) -> None:
    key = ("2411.17700", 2, "summary", "en")
    with Store.open(database_url) as store:
        assert store.texts.put(key, "m", "Alpha.", source_hash="a" * 16, now=NOW) == "Alpha."
        # another run kept one from the same source first: that one stays
        assert store.texts.put(key, "m", "Beta.", source_hash="a" * 16, now=NOW) == "Alpha."
        assert store.texts.get([(key, "a" * 16)], "m") == {key: "Alpha."}
        assert store.texts.get([(key, "b" * 16)], "m") == {}  # written from another source
        assert store.texts.put(key, "m", "Gamma.", source_hash="b" * 16, now=NOW) == "Gamma."
        assert [store.texts.reserve(NOW.date(), "m", 2) for _ in range(3)] == [True, True, False]
        store.texts.charge(NOW.date(), "m", 2)  # retries already made: past the limit
        assert store.texts.reserve(NOW.date(), "m", 4) is False
        for _ in range(2):
            store.texts.record(
                NOW.date(),
                "m",
                written=1,
                cached=2,
                failures={"timeout": 1},
                last_error="x",
                now=NOW,
            )
        (day,) = store.texts.day(NOW.date())
        assert (day.requests, day.written, day.cached, day.failed) == (4, 2, 4, 2)
        assert day.failures == {"timeout": 2} and day.last_error == "x"


def test_an_error_page_with_terminal_escapes_is_shown_harmless(
    llm: LlmStandIn, store: Store, papers: list[Paper]
) -> None:
    hostile = "\x1b[2J\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07 \u202egnp.exe\x9b1m"
    llm.fail_next(502, message=hostile, times=None)
    cfg = config(llm.base_url, max_retries=0)
    _, run = write(cfg, store, [digest("ada", papers[:1], summaries=True)])
    assert run.failed == {"server error": 1}

    from bot.cli.reports import Status, texts_lines
    from bot.store import Workers

    found = Status(NOW, [], [], {}, store.texts.day(NOW.date()), Workers(None, ()))
    status = "\n".join(texts_lines(cfg, found))
    assert "last error at 08:00 UTC: server error: HTTP 502" in status
    for shown in (status, run.line() or ""):
        assert "click" in shown and "gnp.exe" in shown
        assert not any(c in shown for c in "\x1b\x07\u202e\x9b"), repr(shown)
