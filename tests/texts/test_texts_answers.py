"""A model's answer before anyone reads it (`bot.texts.answers`): thinking dropped, markup
and links dropped, empty, too long and wrong-language answers refused; the prompts (one
text per request, plain text); a summary cut for the digest. Model output is untrusted:
Hypothesis sends it what a stranger could."""

from __future__ import annotations

import time

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from bot.core.models import Paper
from bot.texts.answers import MAX_SUMMARY, Unusable, clean_answer, shown_summary
from bot.texts.prompts import MAX_SOURCE, messages, summary_request, translation_request

PAPER = Paper(
    id="2411.17700",
    version=2,
    title="Diffusion Policies for Dexterous Manipulation",
    abstract=(
        "We present a diffusion policy that learns dexterous manipulation from a few "
        "demonstrations. It outperforms prior methods on twelve tasks. Code is released."
    ),
    authors=("Ada Lovelace",),
    categories=("cs.RO",),
)
SUMMARY = summary_request(PAPER)
TITLE_ZH = translation_request(PAPER, "title", "zh", PAPER.title)
ABSTRACT_ZH = translation_request(PAPER, "abstract", "zh", PAPER.abstract)
ABSTRACT_DE = translation_request(PAPER, "abstract", "de", PAPER.abstract)
ZH = "我们提出了一种扩散策略，从少量示范中学习灵巧操作。它在十二项任务上优于以往方法。"


@pytest.mark.parametrize(
    ("raw", "request_", "expected"),
    [
        (
            "A diffusion policy learns manipulation.",
            SUMMARY,
            "A diffusion policy learns manipulation.",
        ),
        (
            "<think>The user wants a summary. Let me think.</think>\n\nIt learns from demos.",
            SUMMARY,
            "It learns from demos.",
        ),
        # the chat template opened the block; the answer only closes it
        ("Let me think about it...</think>It learns from demos.", SUMMARY, "It learns from demos."),
        ("<THINKING>x</THINKING>It works.", SUMMARY, "It works."),
        ("**Summary:** It *works* well.", SUMMARY, "It works well."),
        ("Summary: It works.", SUMMARY, "It works."),
        (
            "It works; see [the code](https://evil.example/x) at https://evil.example.",
            SUMMARY,
            "It works; see the code at",
        ),
        ("<a href='https://evil.example'>It works</a><script>x</script>", SUMMARY, "It worksx"),
        ("Line one.\n\n- Line two.\n# Line three.", SUMMARY, "Line one. Line two. Line three."),
        ("It\u202e works\x00 \u200b.", SUMMARY, "It works ."),
        ('"灵巧操作的扩散策略"', TITLE_ZH, "灵巧操作的扩散策略"),
        ("标题：灵巧操作的扩散策略", TITLE_ZH, "灵巧操作的扩散策略"),
        ("「灵巧操作的扩散策略」\n", TITLE_ZH, "灵巧操作的扩散策略"),
        (ZH, ABSTRACT_ZH, ZH),
        # Chinese keeps the names of methods in Latin letters
        (
            "我们在 ImageNet 和 COCO 上评估 Transformer 模型。",
            ABSTRACT_ZH,
            "我们在 ImageNet 和 COCO 上评估 Transformer 模型。",
        ),
        (
            "Wir stellen eine Diffusionsstrategie vor.",
            ABSTRACT_DE,
            "Wir stellen eine Diffusionsstrategie vor.",
        ),
        # links that mail clients and Slack make of text without a scheme
        (
            "Read more at evil-login.com/verify or mail admin@evil.com today.",
            SUMMARY,
            "Read more at or mail today.",
        ),
        ("It works: https:\u200d//evil.example.", SUMMARY, "It works:"),
        # links split by the Markdown that is dropped: joined again, then dropped too
        (
            "Visit evil**.**com, phish`.`io, *www*.evil.xyz or a__@__evil.org today.",
            SUMMARY,
            "Visit , , or today.",
        ),
        ("Node.js and e.g. PyTorch work.", SUMMARY, "Node.js and e.g. PyTorch work."),
        # markup hidden in markup, chat-format tokens a server leaked
        ("It <scr<script>ipt>works</script>.", SUMMARY, "It works."),
        (
            "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final"
            "<|message|>It works.",
            SUMMARY,
            "It works.",
        ),
        # a letter whose lower case is two letters does not shift the thinking's bounds
        (
            "İ" * 40 + "<think>secret plan</think>This paper studies graphs.",
            SUMMARY,
            "İ" * 40 + "This paper studies graphs.",
        ),
        (
            "<think>İİİİİİİİİİ reasoning</think>This paper studies graphs.",
            SUMMARY,
            "This paper studies graphs.",
        ),
    ],
)
def test_an_answer_is_plain_text(raw: str, request_: object, expected: str) -> None:
    assert clean_answer(raw, request_) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "request_", "reason"),
    [
        (None, SUMMARY, "empty"),
        ("   \n ", SUMMARY, "empty"),
        ("<think>only thinking</think>", SUMMARY, "empty"),
        ("<think>the model ran out of tokens while thinking", SUMMARY, "thinking only"),
        ("https://evil.example/only-a-link", SUMMARY, "empty"),
        ("It works. " * 200, SUMMARY, "too long"),
        ("x" * 300_000, SUMMARY, "too long"),
        # a thinking mode that answered in Chinese when English was asked (and the reverse)
        (ZH, SUMMARY, "wrong language"),
        ("We present a diffusion policy.", ABSTRACT_ZH, "wrong language"),
        ("Мы представляем политику диффузии.", ABSTRACT_DE, "wrong language"),
        (PAPER.abstract, ABSTRACT_DE, "untranslated"),
    ],
)
def test_an_answer_that_cannot_be_shown_says_why(
    raw: str | None, request_: object, reason: str
) -> None:
    with pytest.raises(Unusable) as caught:
        clean_answer(raw, request_)  # type: ignore[arg-type]
    assert caught.value.reason == reason


def test_a_summary_is_cut_near_300_characters_at_a_sentence_or_a_word() -> None:
    """As the digests people read: one paragraph of about 300 characters, at most 330; cut
    at the last sentence's end if that keeps 220, else at a word with "…"."""
    sentence = "This paper proposes a new way to learn dexterous manipulation from demos. "
    cut = shown_summary(sentence * 8)  # sentences end at 74, 148, 222, 296, 370
    assert cut == (sentence * 4).strip() and len(cut) == 295
    # The last end within 330 is too early (a 200-character sentence, then a long one):
    # cut at a word near 300 instead.
    early = "A" + " word" * 39 + ". " + "And then a very long sentence" + " going on" * 40
    cut = shown_summary(early)
    assert cut.endswith("on…") and 280 <= len(cut) <= 300
    words = shown_summary("manipulation " * 60)
    assert words.endswith("manipulation…") and len(words) <= 300
    # Up to 330 characters: whole.
    whole = ("x" * 9 + " ") * 32 + "x" * 9 + "."
    assert len(whole) == 330 and shown_summary(whole) == whole
    # A full stop inside a number or a name is no sentence's end.
    numbers = "Scores rise from 3.5 to 4.2 on every task" + " and more" * 40
    assert "3.…" not in shown_summary(numbers) and shown_summary(numbers).endswith("…")
    short = "It works."
    assert shown_summary(short) == short
    # Chinese sentences end with 。 and no space; the limit scales with the text.
    chinese = "这是一个句子。" * 60
    assert shown_summary(chinese, 100).endswith("。") and len(shown_summary(chinese, 100)) <= 110


@given(st.text(max_size=2000), st.integers(20, 600))
@example("a. " * 400, 300)
def test_a_summary_shown_is_never_longer_than_a_tenth_over_its_limit(text: str, limit: int) -> None:
    shown = shown_summary(text, limit)
    assert len(shown) <= limit + limit // 10
    assert shown == " ".join(text.split()) or len(" ".join(text.split())) > len(shown)


def test_the_prompts_ask_for_one_plain_text_each() -> None:
    system, user = messages(SUMMARY)
    assert system["role"] == "system" and "no Markdown" in system["content"]
    assert "English" in system["content"] and "Abstract: We present" in user["content"]
    system, user = messages(TITLE_ZH)
    assert "into Chinese" in system["content"] and "(BCP 47: zh)" in system["content"]
    assert user["content"] == PAPER.title
    assert SUMMARY.key == ("2411.17700", 2, "summary", "en")
    assert ABSTRACT_ZH.key == ("2411.17700", 2, "abstract", "zh")
    long = translation_request(PAPER, "abstract", "zh", "word " * 5000)
    assert len(long.source) <= MAX_SOURCE + 2


hostile_text = st.one_of(
    st.text(max_size=3000),
    st.text(alphabet=st.sampled_from("<>/think\n*_[]()#`:：\"'「」 \x00\u202e"), max_size=3000),
    st.builds(lambda n: "<think>" * n, st.integers(0, 20_000)),
    st.builds(lambda n: "[" * n + "](" * n, st.integers(0, 20_000)),
    st.builds(lambda n: "<a " + "x" * n, st.integers(0, 50_000)),
)


@given(hostile_text, st.sampled_from([SUMMARY, TITLE_ZH, ABSTRACT_ZH, ABSTRACT_DE]))
@example("<think>" * 20_000, SUMMARY)
@example("</think>" * 20_000, SUMMARY)
@example("[" * 20_000 + "](" * 20_000, SUMMARY)
@example("<a " + " x" * 50_000, SUMMARY)
@example("\u3000" * 40_000 + "ok", SUMMARY)
@example("\u00a0\n" * 20_000 + "ok", SUMMARY)
@example("İ" * 20_000 + "<think>x", SUMMARY)
def test_any_answer_is_shown_as_checked_plain_text_or_refused(raw: str, request_: object) -> None:
    started = time.monotonic()
    try:
        text = clean_answer(raw, request_)  # type: ignore[arg-type]
    except Unusable as exc:
        assert exc.reason in {
            "empty",
            "too long",
            "wrong language",
            "untranslated",
            "thinking only",
        }
    else:
        assert text and text == text.strip()
        assert "\x00" not in text and "\u202e" not in text and "\n" not in text
        assert "<think" not in text.lower() and "https://" not in text
        assert len(text) <= max(MAX_SUMMARY, 3 * len(request_.source))  # type: ignore[attr-defined]
    assert time.monotonic() - started < 2  # linear: nothing backtracks on what a model sends
