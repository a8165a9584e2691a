"""Gmail's 102 KB: every digest email, up to the most papers a subscriber may ask for, in
every layout, stays within `HTML_BUDGET`, on real bundled papers made as heavy as they get
(`support.demo_texts.heaviest_digest`: the longest abstracts, the most authors, every kind
of link, summaries and translations, as real ones are and as long as a runaway model's).

Past 102 KB Gmail clips a message: the rest, the unsubscribe link with it, is behind a
"View entire message" link. An email too long with the texts asked for shows less of each
(short abstracts, then their first lines, then none) before it leaves out any paper; the
papers it leaves out are the lowest ranked, counted with those over `max_papers`. (That is
`render_digest`; a digest with full abstracts is sent whole, in parts, by `render_parts`:
tests/render/test_email_parts.py.)
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any

import pytest
from annotated_types import Le
from sqlmodel import select
from support.config import sink_email
from support.demo_texts import HEAVY_RULES, fifty_paper_digest, heaviest_digest
from support.digests import make_paper, sample_digest
from support.servers import smtp_sink

from bot.channels.linking import Linker
from bot.config import parse_config
from bot.config.subscribers import SubscriberConfig
from bot.core.links import LinkSigner, max_ages
from bot.core.models import Digest, DigestItem, Paper
from bot.pipeline import DeliveryReport, DeliveryRequest, build_channels, deliver, wire
from bot.render.email import (
    HTML_BUDGET,
    SHORTENED_NOTES,
    DigestLinks,
    html_size,
    render_digest,
    render_parts,
)
from bot.render.words import words_for
from bot.store import Store, utcnow
from bot.store.tables import DeliveryRow

# The most papers a subscriber may ask for, as the config checks it.
MAX_PAPERS = next(
    m.le for m in SubscriberConfig.model_fields["max_papers"].metadata if isinstance(m, Le)
)

LAYOUTS: dict[str, dict[str, Any]] = {
    "short": {},
    "full": {"abstracts": "full"},
    "summaries": {"summaries": True},
    "translated": {"language": "zh"},
    "both-full": {"summaries": True, "language": "zh", "abstracts": "full"},
}


def shown(html: str) -> int:
    return len(re.findall(r'<div id="paper-\d+"', html))


def rendered(digest: Digest) -> tuple[int, Digest, str]:
    """The digest's email: its HTML's size as it arrives, the digest it shows, its HTML."""
    email = render_digest(digest)
    assert email.digest is not None
    return html_size(email.html), email.digest, email.html


def test_the_config_allows_a_thousand_papers() -> None:
    assert MAX_PAPERS == 1000  # if it changes, the checks below follow it


@pytest.mark.parametrize("changes", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_fifty_of_the_heaviest_papers_fit_whole(changes: dict[str, Any]) -> None:
    """The default max_papers, with the heaviest real papers: every paper is there, with
    the texts asked for (short abstracts, summaries, translations), or shortened when full
    ones or a summary and its translation for each paper do not fit, and said so."""
    asked = heaviest_digest(50, **changes)
    size, digest, html = rendered(asked)
    print(f"{'+'.join(f'{k}={v}' for k, v in changes.items()) or 'short'}: {size / 1024:.1f} KB")
    assert size <= HTML_BUDGET
    assert digest.count == shown(html) == 50 and digest.omitted == asked.omitted
    words = words_for(asked.subscriber.language)  # the notes are in the reader's language
    notes = [length for length, note in SHORTENED_NOTES.items() if words.gettext(note) in html]
    if changes.get("abstracts") == "full" and not changes.get("summaries"):
        assert notes in (["short"], ["brief"])
    elif changes.get("abstracts") == "full":  # a summary (at most 330 characters) in place
        assert notes in ([], ["short"], ["brief"])
    else:
        assert notes == []


@pytest.mark.parametrize(
    "changes", [{"summaries": True}, {"language": "zh"}, LAYOUTS["both-full"]], ids=str
)
def test_runaway_texts_fit_too(changes: dict[str, Any]) -> None:
    """Summaries and translations as long as a model's runaway answer may be shown: the
    texts are cut, and the fifty papers are there."""
    asked = heaviest_digest(50, runaway=True, **changes)
    size, digest, html = rendered(asked)
    assert size <= HTML_BUDGET
    assert digest.count == shown(html) == 50 and digest.omitted == asked.omitted


@pytest.mark.parametrize("name", ["short", "summaries", "both-full"])
def test_the_most_papers_a_subscriber_may_ask_for_fit(name: str) -> None:
    """max_papers = 1000 (662 match): text goes first, then the lowest-ranked papers; the
    email says how many of how many it shows, and that more would not fit."""
    asked = heaviest_digest(MAX_PAPERS, **LAYOUTS[name])
    size, digest, html = rendered(asked)
    assert size <= HTML_BUDGET
    assert 50 <= digest.count == shown(html) < asked.count
    assert len(digest.omitted) == asked.count - digest.count  # each one counted, none lost
    words = words_for(asked.subscriber.language)  # the notes are in the reader's language
    assert words.gettext(SHORTENED_NOTES["none"]) in html  # no abstract left before any went
    said = words.gettext(
        "The best %(shown)s of the %(total)s papers that matched your rules are here."
    ) % {"shown": digest.count, "total": asked.count}
    assert words.gettext("%(shown)s More would not fit in one email.") % {"shown": said} in html
    # The ones kept are the best: none left out scores above one kept.
    scores = {item.paper.id: item.score for item in asked.items}
    kept = min(scores[item.paper.id] for item in digest.items)
    assert kept >= max(scores[paper.id] for paper in digest.omitted)
    # The whole email is there: Gmail shows its end, the unsubscribe line with it.
    assert html.rstrip().endswith("</html>") and "Thank you to arXiv" in html


def test_texts_go_before_papers() -> None:
    """A hundred of the heaviest papers with summaries (each at most 330 characters): too
    long with them whole, but every paper fits with their first lines: every paper is
    kept."""
    size, digest, html = rendered(heaviest_digest(100, summaries=True))
    assert size <= HTML_BUDGET and digest.count == 100
    assert SHORTENED_NOTES["brief"] in html and "More would not fit" not in html


def test_a_plain_text_digest_is_measured_as_text() -> None:
    """Sent as plain text only, it is the text that must fit, not the HTML never sent."""
    digest = heaviest_digest(80, email_format="text", abstracts="full")
    email = render_digest(digest)
    assert html_size(email.text) <= HTML_BUDGET
    assert email.digest is not None and email.digest.count == 80


@pytest.mark.parametrize("changes", [{}, {"language": "zh"}], ids=["short", "translated"])
def test_a_realistic_fifty_paper_digest_is_light(changes: dict[str, Any]) -> None:
    """The bundled day's fifty papers for three rules: far under the budget (130 KB before
    the markup was made light)."""
    size, digest, _ = rendered(fifty_paper_digest(**changes))
    assert digest.count == 50
    assert size < (60_000 if not changes else 75_000), size


@pytest.mark.database
def test_papers_left_out_to_fit_are_recorded_and_not_sent_later(
    database_url: str, full_feed_papers: tuple[Paper, ...]
) -> None:
    """Through the pipeline, over SMTP: the papers an email cannot hold are recorded as left
    out, like those over max_papers (never as sent, never sent later); the email that went
    shows exactly the papers recorded as sent."""
    with Store.open(database_url) as store, smtp_sink() as (sink, port):
        config = parse_config(
            {
                "version": 1,
                "database": {"url": database_url},
                "email": sink_email(port),
                "subscribers": [
                    {
                        "name": "ada",
                        "email": "ada@lab.example",
                        "rules": list(HEAVY_RULES),
                        "max_papers": MAX_PAPERS,
                    }
                ],
            },
            environ={},
        )
        store.papers.upsert(full_feed_papers, now=utcnow())
        request = DeliveryRequest(since=date(2024, 11, 28))

        def run() -> list[DeliveryReport]:
            channels = build_channels(config)
            return asyncio.run(deliver(wire(config, store, channels), request, now=utcnow()))

        (report,) = run()
        assert report.status == "sent" and report.omitted > 0
        (message,) = sink.messages
        html = message.get_body(preferencelist=("html",)).get_content()
        assert html_size(html) <= HTML_BUDGET and html.count("\r\n") > 100  # as it came
        assert shown(html) == report.count
        sub = store.subscribers.all(config.declared_subscribers())[0]
        with store.database.session() as session:
            rows = session.exec(select(DeliveryRow).where(DeliveryRow.subscriber_id == sub.id))
            statuses = Counter(row.status for row in rows)
        assert statuses == {"sent": report.count, "omitted": report.omitted}
        (again,) = run()  # nothing left out is sent later
        assert again.status == "nothing" and len(sink.messages) == 1


# A long site address (48 characters) and a six-digit subscriber id: links as long as a
# real deployment's get.
LONG_SITE = "https://paperbell.robotics.example-university.edu"


def with_signed_links(digest: Digest) -> tuple[Digest, DigestLinks]:
    """The digest for a stored subscriber, with the links a sent email carries: manage,
    one-click unsubscribe, each paper's 👍 / 👎, the digest in the archive and the feed."""
    signer = LinkSigner(
        "k" * 40, LONG_SITE, max_age=max_ages(manage_days=1, unsubscribe_days=1, confirm_days=1)
    )
    sub = replace(digest.subscriber, id=123_456, created=datetime(2025, 1, 1, tzinfo=UTC))
    now = datetime(2026, 1, 1, tzinfo=UTC)
    links = Linker(now=now, signer=signer).links(
        sub, [item.paper.id for item in digest.items], digest.digest_id
    )
    assert links is not None and len(links.feedback) == len(digest.items)
    return replace(digest, subscriber=sub), links


@pytest.mark.parametrize("changes", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_fifty_of_the_heaviest_papers_with_their_votes_fit(changes: dict[str, Any]) -> None:
    """With two signed links a paper in the HTML part (👍 / 👎, about 110 characters each at
    a long site address), every one of the fifty heaviest papers is there with its links;
    their text is shortened (and said so) where it would not fit."""
    digest, links = with_signed_links(heaviest_digest(50, **changes))
    email = render_digest(digest, links=links)
    size = html_size(email.html)
    print(f"{'+'.join(f'{k}={v}' for k, v in changes.items()) or 'short'}: {size / 1024:.1f} KB")
    assert size <= HTML_BUDGET
    assert email.digest is not None and email.digest.count == shown(email.html) == 50
    for votes in links.feedback.values():
        assert f'href="{votes.like}"' in email.html and f'href="{votes.dislike}"' in email.html
    # The text part: one link for them all, to the email's rating page.
    assert links.rating is not None and email.text.count(links.rating) == 1


@pytest.mark.parametrize("changes", [{}, {"language": "zh"}], ids=["short", "translated"])
def test_a_realistic_fifty_paper_digest_with_its_votes_is_light(changes: dict[str, Any]) -> None:
    """The bundled day's fifty papers with every signed link: whole (nothing shortened), and
    the 👍 / 👎 links cost about 13 KB."""
    digest, links = with_signed_links(fifty_paper_digest(**changes))
    bare = html_size(render_digest(digest).html)
    email = render_digest(digest, links=links)
    size = html_size(email.html)
    assert email.digest is not None and email.digest.count == 50
    assert not any(note in email.html for note in SHORTENED_NOTES.values())
    assert size < (75_000 if not changes else 90_000), size
    assert size - bare < 15_000, size - bare


RUNAWAY = "word " * 40_000  # 200,000 characters: a broken or hostile feed's field
RUNAWAY_FIELDS: dict[str, dict[str, Any]] = {
    "title": {"title": RUNAWAY},
    "an author": {"authors": (RUNAWAY, "Ada Lovelace")},
    "journal_ref": {"journal_ref": RUNAWAY},
    "a category": {"categories": (RUNAWAY,)},
    "categories": {"categories": tuple(f"cat.{n:05d}" for n in range(20_000))},
    "abstract": {"abstract": RUNAWAY},
}


@pytest.mark.parametrize("abstracts", ["short", "full"])
@pytest.mark.parametrize("fields", RUNAWAY_FIELDS.values(), ids=RUNAWAY_FIELDS.keys())
def test_a_paper_with_a_runaway_field_is_shown_cut_beside_every_other(
    fields: dict[str, Any], abstracts: str
) -> None:
    """A paper whose title, author, journal reference, category or abstract runs to
    200,000 characters, ranked first: it is shown cut, and every other paper is there, in
    one email within the budget (text part too), none left out."""
    sample = sample_digest()
    runaway = make_paper(9, **fields)
    first = sample.groups[0]
    item = DigestItem(paper=runaway, rules=(first.rule,), hits=(), score=5.0)
    digest = replace(
        sample,
        groups=(replace(first, items=(item, *first.items)), *sample.groups[1:]),
        subscriber=replace(sample.subscriber, abstracts=abstracts),
    )
    (email,) = render_parts(digest)
    assert email.digest is not None
    assert email.digest.count == digest.count == shown(email.html)
    assert email.digest.omitted == digest.omitted  # none left out to fit
    assert html_size(email.html) <= HTML_BUDGET and len(email.text) <= HTML_BUDGET
