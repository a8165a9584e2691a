"""`paperbell bounce`, end to end: with [email] bounce_address, a digest goes to a real SMTP
server on loopback from its VERP address; the DSN Postfix writes for it (its real format,
tests/fixtures/bounces/postfix-unknown-user.eml, quoting the message paperbell sent), piped
into `paperbell bounce` as the mail server runs it, pauses that subscriber's email, as
`list`, `status` and the manage page show, and no one else's; a DSN answering no message
paperbell sent changes nothing; whatever comes in, it exits 0. Fuzzed with Hypothesis."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.bounces import ENV, fixture, pipe_bounce, postfix_dsn, write_config
from support.cli import invoke
from support.pages import Site
from support.servers import smtp_sink

from bot.cli.bounces import read_capped
from bot.core.verp import Verp
from bot.pipeline.bounces import handle_bounce


def listed(config: Path) -> str:
    result = invoke("list", config=config, env=ENV)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.database
def test_a_postfix_dsn_for_a_digest_sent_pauses_that_subscribers_email(
    tmp_path: Path, database_url: str
) -> None:
    with smtp_sink() as (sink, port):
        config = write_config(tmp_path, database_url, port)
        assert invoke("poll", config=config, env=ENV).exit_code == 0
        sent = invoke("digest", "--since", "2024-11-28", config=config, env=ENV)
        assert sent.exit_code == 0, sent.output
    envelopes = {
        to[0]: (mail_from, raw)
        for (mail_from, to), raw in zip(sink.envelopes, sink.raw, strict=True)
    }
    assert set(envelopes) == {"ada@example.org", "bob@example.org"}
    mail_from, raw = envelopes["ada@example.org"]
    assert re.fullmatch(r"bounces\+\d+-[a-z2-7]{16}@papers\.example\.org", mail_from)
    assert envelopes["bob@example.org"][0] != mail_from
    before = listed(config)
    assert "paused" not in before

    # A DSN about a message paperbell never sent: its token signed with another key, then
    # none at all. Nothing changes.
    stranger = Verp("another-site-key-" + "x" * 30, "bounces@papers.example.org")
    for envelope_from in (stranger.address(1), "someone@elsewhere.example"):
        other = postfix_dsn(raw, envelope_from=envelope_from, recipient="nobody@example.org")
        done = pipe_bounce(other, config, env=ENV)
        assert done.returncode == 0, done.stderr
        assert re.match(r"bounce: (forged|tokenless): ", done.stdout), done.stdout
    assert listed(config) == before

    dsn = postfix_dsn(raw, envelope_from=mail_from, recipient="ada@example.org")
    done = pipe_bounce(dsn, config, env=ENV)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("bounce: paused: ada: email paused: mailbox unknown (5.1.1)")
    after = listed(config)
    ada, bob = after.split("\nbob ", 1)
    assert re.search(r"email paused since \d{1,2} \w{3}: mailbox unknown \(5\.1\.1\)", ada)
    assert "paused" not in bob
    status = invoke("status", config=config, env=ENV)
    assert re.search(
        r"\n  ada <ada@example\.org>: paused: mailbox unknown \(5\.1\.1\)\n", status.output
    )
    assert "bounces today" in status.output
    assert "1 of 2 emails sent (50.0%: 1 hard, 0 soft); complaints: 0 (0.0%)" in status.output
    assert (
        "ignored: 1 unreadable, forged or about no message sent, 1 without the envelope's token"
        in status.output
    )
    # The next digest run leaves ada's email out, and says why.
    again = invoke("digest", "--since", "2024-11-28", "--dry-run", config=config, env=ENV)
    assert "mailbox unknown (5.1.1)" in again.output
    # `paperbell resume` gives it back.
    assert invoke("resume", "ada", config=config, env=ENV).exit_code == 0
    assert "paused" not in listed(config)


@pytest.mark.parametrize(
    "raw",
    [b"", b"\x00\xff" * 100, fixture("arf-02.eml"), fixture("rfc3834-01.eml")],
)
def test_bounce_exits_0_whatever_comes_in(tmp_path: Path, raw: bytes) -> None:
    config = write_config(tmp_path, f"sqlite:///{tmp_path / 'db.sqlite'}", 9)
    done = pipe_bounce(raw, config, env=ENV)
    assert done.returncode == 0 and done.stdout.startswith("bounce: "), done.stderr


def test_without_the_secret_key_it_says_so_and_changes_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path, f"sqlite:///{tmp_path / 'db.sqlite'}", 9)
    done = pipe_bounce(fixture("postfix-unknown-user.eml"), config)  # PB_SECRET_KEY unset
    assert done.returncode == 0 and done.stdout.startswith("bounce: tokenless: ")
    assert "secret_key_env names PB_SECRET_KEY, which is not set" in done.stderr


def test_bounce_exits_0_with_a_broken_config(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("version = 1\n[email\n")
    done = pipe_bounce(fixture("postfix-unknown-user.eml"), config)
    assert done.returncode == 0 and "bounce: not recorded:" in done.stderr


def test_the_input_is_capped_and_read_to_its_end() -> None:
    stream = io.BytesIO(b"x" * 5000)
    assert read_capped(stream, 1000) == (b"x" * 1000, True)
    assert stream.read() == b""
    assert read_capped(io.BytesIO(b"abc"), 1000) == (b"abc", False)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.binary(max_size=3000),
        st.text(max_size=2000).map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.sampled_from(
            [fixture(n) for n in ("postfix-mailbox-full.eml", "exim-03.eml", "gmail-02.eml")]
        ).map(lambda raw: raw.replace(b"Status: ", b"Status: \x00\xe9")),
    )
)
@example(b"Content-Type: multipart/report; report-type=delivery-status; boundary=b\n\n--b\n" * 50)
def test_the_bounce_entry_point_takes_anything(tmp_path: Path, raw: bytes) -> None:
    """In this process (a subprocess per example would be slow): exit 0, one line out."""
    config = write_config(tmp_path, f"sqlite:///{tmp_path / 'fuzz.sqlite'}", 9)
    result = invoke("bounce", config=config, env=ENV, stdin=raw)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("bounce: ")


def test_the_manage_page_says_why_email_is_paused_and_resumes_it(site: Site) -> None:
    """A hard bounce recorded for ada: her manage page says "Email paused since ...:
    mailbox unknown (5.1.1)" and offers to resume it, which brings her email back."""
    ada = site.subscriber("ada")
    site.deliver()
    records = (site.store.bounces.message(r) for r in range(1, 50))
    message = next(m for m in records if m is not None and m.subscriber == "ada")
    verp = Verp("k" * 40, "bounces@papers.lab.example")
    dsn = postfix_dsn(
        b"Subject: x\n\nx\n", envelope_from=verp.address(message.id), recipient=message.recipient
    )
    done = handle_bounce(dsn, store=site.store, verp=verp, bounce_limit=3, now=site.clock())
    assert done.action == "paused"
    path = site.link("manage", "ada")
    page = site.http.get(path).text
    day = f"{site.clock():%-d %b}"
    assert f"Email paused since {day}: mailbox unknown (5.1.1)" in page
    assert "Resume email" in page
    resumed = site.post(path + "/resume-email", {}, page=path)
    assert resumed.status_code == 303
    page = site.http.get(resumed.headers["location"]).text
    assert "Email resumed" in page and "Resume email" not in page
    assert site.store.targets.paused(ada.id) == {}
