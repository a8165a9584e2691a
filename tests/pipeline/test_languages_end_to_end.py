"""The reader's language and clock, end to end: the daemon (`world`: the real listing of
28 Nov 2024 served on loopback, a fixed clock moved by hand) sends over SMTP to a server on
loopback; a subscriber whose language is Chinese gets the email's own words in Chinese and
its times on their clock, and an English one gets what they always got."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

from support.world import World

READERS = [
    {
        "name": "shanghai",
        "email": "shanghai@example.org",
        "rules": ["learning"],
        "timezone": "Asia/Shanghai",
        "time": "09:00",
        "language": "zh",
    },
    {"name": "london", "email": "london@example.org", "rules": ["learning"], "time": "08:00"},
]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def part(message: EmailMessage, kind: str) -> str:
    """A part's text, its lines joined (the plain text is wrapped at 72 columns)."""
    body = message.get_body((kind,))
    assert body is not None
    return " ".join(str(body.get_content()).split())


def test_a_chinese_reader_gets_chinese_words_on_their_clock(world: Any) -> None:
    async def go() -> World:
        w = await world(at("2026-11-24T00:30"), subscribers=READERS)  # Tuesday
        await w.run_until(at("2026-11-24T08:15"))
        return w

    w = asyncio.run(go())
    ((sent, chinese),) = w.mail("shanghai")
    assert sent == at("2026-11-24T01:00")  # 09:00 in Shanghai
    subject = str(chinese["Subject"])
    assert subject.startswith(tuple(f"{n} 篇新论文：learning" for n in range(1, 200))), subject
    assert subject.endswith("11月23日周一")  # Monday's listing, the current one at 09:00
    text, html = part(chinese, "plain"), part(chinese, "html")
    assert "篇新论文符合你的规则，来自 arXiv 2026年11月23日星期一的公 告。" in text
    # When it was made, on the reader's clock: 01:00 UTC is 09:00 in Shanghai.
    assert "生成时间：2026年11月24日星期二 09:00（UTC+8）。" in html
    assert '<html lang="zh-Hans"' in html
    assert "learning <span" in html or "learning</code>" in html
    assert "篇论文" in html
    for english in ("new paper", "matched your rules", "View in your browser", "Unsubscribe"):
        assert english not in text and english not in html, english
    assert "你收到这封邮件，是因为" in html and "要退订，请写信给" in html  # the footer
    assert "Thank you to arXiv for use of its open access interoperability." in html

    ((_, english),) = w.mail("london")
    subject = str(english["Subject"])
    assert re.fullmatch(r"\d+ new papers: learning — Mon 23 – Tue 24 Nov", subject), subject
    text = part(english, "plain")
    assert "new papers matched your rules from the arXiv announcement" in text
    assert "Generated Tuesday 24 November 2026, 08:00 (UTC)." in part(english, "html")
    assert "You get this email because" in part(english, "html")
