"""Where subscribers and rules come in (`paperbell subscribe`, the Slack command, the manage
page), bad input is refused with a clear message, and one person's rules cost bounded work.

Issue 17, fault 8: a NUL or control character in a rule was accepted (PostgreSQL then refused
the NUL: a 500), a 300-character time zone was "cannot write .../zoneinfo/AAA...: File name
too long" (exit 1) on the command line and a 500 from the settings form. Fault 7: no cap on
rules per subscriber, and the manage page matched every rule over a week inside the request
(18-20 s for 50 rules on a real day); now it reads counts made when digests are built, and the
live rule check is throttled."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.cli import invoke, run, run_here
from support.config import slack_config
from support.hostile import LANGUAGE_TEXTS, expected_language
from support.pages import Site, open_site
from support.slack import wired_slack_app

from bot.core.errors import RuleError
from bot.demo.slack_standin import SlackStandIn
from bot.match.matcher import Matcher
from bot.pipeline import refresh_rule_counts
from bot.rules import parse_rule
from bot.slack.commands import SlashCommands
from bot.slack.messages import CommandRequest
from bot.store import Store

pytestmark = pytest.mark.database

ADA = "U07ADA123"
NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)
HOSTILE_RULES = [
    "robot\x00arm",
    "robot\x1b[31m",
    "ti:a\u202eb",
    "\x7f",
    "x" * 501,
    "a OR (b",
    "",
    '"diffusion policy" cat:cs.RO',
]
RULE_TEXTS = st.one_of(
    st.sampled_from(HOSTILE_RULES),
    st.text(
        alphabet=st.characters(exclude_categories=["Cs"]) | st.sampled_from('\x00\x1b"()-:'),
        max_size=60,
    ),
    st.text(alphabet='abc OR AND NOT()-":ti', max_size=40),
)


def _refusal(text: str) -> RuleError | None:
    try:
        parse_rule(text)
    except RuleError as exc:
        return exc
    return None


# -- the rule parser, which every entry point goes through ---------------------------------------


@pytest.mark.parametrize(
    ("text", "code", "column"),
    [
        ("robot\x00arm", "U+0000", 6),
        ("  robot\x1b[31m", "U+001B", 6),  # the column of the rule as stored (stripped)
        ("ti:a\u202eb", "U+202E", 5),
        ("a\x7f", "U+007F", 2),
        ("a\x85b", "U+0085", 2),
        ("x\ud800", "U+D800", 2),
        ("a" * 600 + "\x00", "U+0000", 601),  # before the length: the worse problem
    ],
)
def test_a_control_character_in_a_rule_is_refused_at_its_column(
    text: str, code: str, column: int
) -> None:
    with pytest.raises(RuleError) as info:
        parse_rule(text)
    assert info.value.reason == f"a rule cannot hold the control character {code}"
    assert info.value.position + 1 == column
    shown, caret = info.value.caret().split("\n")
    assert shown.isprintable() and "\ufffd" in shown and caret.index("^") == column - 1


def test_tabs_and_line_breaks_are_spaces_in_a_rule() -> None:
    assert parse_rule("robot\tgrasping\nOR\r\nmanipulation").node is not None


# -- `paperbell subscribe` ----------------------------------------------------------------------


def _config(tmp_path: Path, database_url: str, *, max_rules: int = 3) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(
        f'version = 1\n\n[database]\nurl = "{database_url}"\n\n[digest]\nmax_rules = {max_rules}'
        '\n\n[email]\nfrom = "paperbell <papers@example.org>"\n'
    )
    return config


def test_subscribe_refuses_control_characters_odd_time_zones_and_too_many_rules(
    tmp_path: Path, database_url: str
) -> None:
    config = str(_config(tmp_path, database_url))

    def subscribe(*args: str, here: bool = True) -> tuple[int, str]:
        """`paperbell subscribe ARGS`: as a separate process, or (`here`) the same command
        line in this process, without a process start."""
        command = ("subscribe", "-c", config, *args)
        done = run_here(*command) if here else run(*command, cwd=tmp_path)
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, done.stderr

    code, err = subscribe("ada", "--email", "ada@example.org", "robot\x1b[31m", here=False)
    assert code == 2 and "a rule cannot hold the control character U+001B at column 6" in err
    code, err = subscribe("ada", "--email", "ada@example.org", "robot", "--timezone", "A" * 300)
    assert code == 2 and "timezone: unknown time zone 'AAAA" in err and "cannot write" not in err
    code, err = subscribe("ada", "--email", "ada@example.org", "a", "b", "c", "d")
    assert code == 2 and "4 rules, more than the 3 a subscriber may have" in err
    assert subscribe("ada", "--email", "ada@example.org", "a", "b")[0] == 0
    code, err = subscribe("ada", "c", "d")
    assert code == 2 and "ada would have 4 rules" in err
    assert subscribe("ada", "a", "c")[0] == 0  # "a" again, and one new: 3 rules
    with Store.open(database_url) as store:
        assert store.subscribers.rule_texts("ada") == ["a", "b", "c"]


NAMES = itertools.count()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rule=RULE_TEXTS, zone=st.sampled_from([None, "UTC", "A" * 300, "../x", "Europe/Paris"]))
@example(rule="robot\x00arm", zone=None)
@example(rule="robot", zone="Mars/\x00lympus")
@example(rule="-c", zone=None)
def test_subscribe_answers_any_rule_with_success_or_a_clear_refusal(
    tmp_path: Path, database_url: str, rule: str, zone: str | None
) -> None:
    config = _config(tmp_path, database_url, max_rules=50)
    name = f"p{next(NAMES)}"
    zone_args = ["--timezone", zone] if zone else []
    email = f"{name}@example.org"
    args = ["subscribe", "-c", str(config), *zone_args, "--email", email, name, "--", rule]
    result = invoke(*args)
    assert result.exit_code in (0, 2), (result.output, result.exception)
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert result.output.startswith("error: ")
        if (problem := _refusal(rule)) is not None and rule.strip():
            assert problem.reason in result.output
    else:
        assert _refusal(rule) is None and f"subscribed {name}" in result.output


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(language=LANGUAGE_TEXTS)
@example(language="zh\x00")
@example(language="x" * 5000)
@example(language="none")
def test_subscribe_answers_any_language_with_its_tag_or_a_clear_refusal(
    tmp_path: Path, database_url: str, language: str
) -> None:
    config = _config(tmp_path, database_url, max_rules=50)
    name = f"p{next(NAMES)}"
    args = ["subscribe", "-c", str(config), "--email", f"{name}@example.org"]
    result = invoke(*args, f"--language={language}", name, "robot")
    assert result.exit_code in (0, 2), (result.output, result.exception)
    tag, refusal = expected_language(language)
    if refusal is not None:
        assert result.exit_code == 2 and result.output.startswith("error: "), result.output
        assert f"language: {refusal}" in result.output and "\x00" not in result.output
        return
    assert result.exit_code == 0, result.output
    with Store.open(database_url) as store:
        found = next(s for s in store.subscribers.all() if s.name == name)
    assert found.language == tag


# -- the Slack command --------------------------------------------------------------------------


@pytest.fixture
def commands(database_url: str) -> Iterator[SlashCommands]:
    with SlackStandIn() as standin:
        standin.add_user(ADA, "ada", email="ada@lab.example", tz="Europe/London")
        config = slack_config(standin, database_url, [])
        config.digest.max_rules = 5
        with Store.open(config.database_url()) as store:
            built = wired_slack_app(config, store, clock=lambda: NOW)
            assert built is not None
            yield built.responder.commands


def _say(commands: SlashCommands, text: str) -> str:
    reply = asyncio.run(commands.handle(CommandRequest(text=text, user_id=ADA)))
    assert reply.text
    return reply.text


def test_slack_refuses_a_nul_in_a_rule_and_a_sixth_rule_politely(commands: SlashCommands) -> None:
    said = _say(commands, "subscribe robot\x00arm")
    assert said.startswith(":warning: That rule does not parse: a rule cannot hold the control")
    assert "U+0000 at column 6" in said and "\x00" not in said
    for number in range(1, 6):
        assert not _say(commands, f"subscribe topic{number}").startswith(":warning:")
    said = _say(commands, "subscribe topic6")
    assert said.startswith(":warning: that would make 6 rules, more than the 5")
    assert "remove N" in said
    assert len(commands.store.subscribers.rule_texts("slack.ada")) == 5


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rule=RULE_TEXTS)
@example(rule="robot\x00arm")
@example(rule="x" * 501)
def test_slack_answers_any_rule_with_a_reply_and_refuses_bad_ones_clearly(
    database_url: str, rule: str
) -> None:
    with SlackStandIn() as standin:
        standin.add_user(ADA, "ada", email="ada@lab.example", tz="Europe/London")
        config = slack_config(standin, database_url, [])
        with Store.open(config.database_url()) as store:
            built = wired_slack_app(config, store, clock=lambda: NOW)
            assert built is not None
            commands = built.responder.commands
            for verb in ("subscribe", "try"):
                said = _say(commands, f"{verb} {rule}")
                problem = _refusal(rule)
                if problem is not None and rule.strip() and not rule.lstrip().startswith("#"):
                    assert said.startswith(":warning:"), said
                    assert "\x00" not in said
            store.database.engine.dispose()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(language=LANGUAGE_TEXTS)
@example(language="zh\x00")
@example(language="x" * 5000)
@example(language="<!channel> zh")
def test_slack_answers_any_language_with_its_tag_or_a_clear_refusal(
    commands: SlashCommands, language: str
) -> None:
    if commands.store.subscribers.by_slack(user=ADA) is None:
        _say(commands, "subscribe robot")
    commands.store.subscribers.set_schedule("slack.ada", language="fr")
    said = _say(commands, f"language {language}")
    assert "\x00" not in said
    ada = commands.subscriptions.subscriber("slack.ada")
    assert ada is not None
    words = language.split()
    if not words:  # nothing after the verb: it says which language, and changes nothing
        assert said.startswith("Digests come in French beside English") and ada.language == "fr"
        return
    if words[0].startswith("#") or words[0].startswith("<#"):  # a channel: not this test's
        assert said.startswith(":warning:") and ada.language == "fr"
        return
    tag, refusal = expected_language(language)
    if refusal is not None:
        assert said.startswith(":warning: language "), said
        assert said.endswith("or `/papers language off` for English only.")
        assert ada.language == "fr"  # nothing changed
    else:
        assert said.startswith("From now on your digests"), said
        assert ada.language == tag


def test_slack_try_is_limited_per_user(commands: SlashCommands) -> None:
    said = [_say(commands, f"try robot{n}") for n in range(7)]
    assert all(s.startswith("No papers are stored yet") for s in said[:6])
    assert said[6].startswith(":hourglass: You tried 6 rules in the last minute")
    other = asyncio.run(commands.handle(CommandRequest(text="try robot", user_id="U07BOB456")))
    assert other.text.startswith("No papers are stored yet")  # per user


def test_an_unknown_time_zone_from_slack_is_ignored(database_url: str) -> None:
    with SlackStandIn() as standin:
        standin.add_user(ADA, "ada", email="ada@lab.example", tz="A" * 300)
        config = slack_config(standin, database_url, [])
        with Store.open(config.database_url()) as store:
            built = wired_slack_app(config, store, clock=lambda: NOW)
            assert built is not None
            said = _say(built.responder.commands, "subscribe robot")
            assert said.startswith("Welcome!") and "daily at 08:00 (UTC)" in said


# -- the manage page ----------------------------------------------------------------------------


def test_the_manage_page_refuses_a_nul_rule_and_an_absurd_time_zone_with_400(
    site: Site,
) -> None:
    path = site.link("manage", "ada")
    for rule in ("robot\x00arm", "robot\x1b[2J"):
        added = site.post(path + "/add", {"rule": rule}, page=path)
        assert added.status_code == 400, added.text
        assert "a rule cannot hold the control character" in added.text
    assert len(site.subscriber("ada").rules) == 2
    check = site.http.post("/rules/check", data={"rule": "robot\x00arm"}).json()
    assert check["ok"] is False and check["column"] == 6
    for zone in ("A" * 300, "../../etc/passwd", "America", "Europe/\x00Paris"):
        saved = site.post(path + "/settings", {"timezone": zone}, page=path)
        assert saved.status_code == 400 and "unknown time zone" in saved.text, saved.text
    assert site.subscriber("ada").schedule.timezone == "UTC"


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(language=LANGUAGE_TEXTS)
@example(language="zh\x00")
@example(language="x" * 5000)
def test_the_manage_page_answers_any_language_with_303_or_a_clear_400(
    site: Site, language: str
) -> None:
    path = site.link("manage", "ada")
    site.store.subscribers.set_schedule("ada", language="fr")
    saved = site.post(path + "/settings", {"summaries": "off", "language": language}, page=path)
    tag, refusal = expected_language(language)
    if not language:  # an empty field is a field not sent: nothing changes
        assert saved.status_code == 303 and site.subscriber("ada").language == "fr"
    elif refusal is not None:
        assert saved.status_code == 400, saved.text
        assert "language: language " in saved.text and "not" in saved.text
        assert site.subscriber("ada").language == "fr"
    else:
        assert saved.status_code == 303, saved.text
        assert site.subscriber("ada").language == tag


def test_the_manage_page_caps_the_rules(database_url: str) -> None:
    with open_site(database_url, digest={"max_rules": 3}) as site:
        _caps_the_rules(site)


def _caps_the_rules(site: Site) -> None:
    path = site.link("manage", "ada")
    assert site.post(path + "/add", {"rule": "third"}, page=path).status_code == 303
    fourth = site.post(path + "/add", {"rule": "fourth"}, page=path)
    assert fourth.status_code == 400
    assert "that would make 4 rules, more than the 3 a subscriber may have" in fourth.text
    assert len(site.subscriber("ada").rules) == 3
    with pytest.raises(Exception, match="more than the 3"):
        site.store.subscribers.add_rule("ada", "fourth", now=site.clock(), max_rules=3)


def test_the_sign_up_page_refuses_control_characters_with_400(site: Site) -> None:
    for email, rule in (("new@lab.example", "robot\x00arm"), ("n\x00w@lab.example", "robot")):
        answer = site.post("/subscribe", {"email": email, "rule": rule})
        assert answer.status_code == 400, answer.text
        assert "control character" in answer.text or "address" in answer.text
    assert not site.sink.messages


@pytest.fixture
def no_matching(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every use of the matcher from now on, counted (the real one still runs)."""
    calls: list[int] = []
    real = Matcher.match

    def counted(self: Matcher, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Matcher, "match", counted)
    return calls


def test_a_manage_page_view_reads_counts_made_at_digest_time_and_matches_nothing(
    site: Site,
    no_matching: list[int],
) -> None:
    rules = [f"topic{n} OR robot{n}" for n in range(48)]
    site.store.subscribers.add("ada", email=None, rules=rules, now=site.clock())
    path = site.link("manage", "ada")
    page = site.http.get(path)
    assert page.status_code == 200 and page.text.count("Not counted yet") == 50
    assert no_matching == []  # before: every rule matched over a week, in the request
    site.deliver()
    assert no_matching  # the digests' run counted them
    no_matching.clear()
    page = site.http.get(path)
    assert page.text.count("(counted on 28 Nov 2024)") == 50
    assert "Not counted yet" not in page.text
    assert no_matching == []
    found = re.findall(r"Matched (\d+) of the (\d+) papers", page.text)
    assert len(found) == 50 and int(found[1][0]) > 0  # "robot cat:cs.RO" matches some

    # At most once a day: a rule added today waits for tomorrow's count.
    site.post(path + "/remove", {"number": "3"}, page=path)
    site.post(path + "/add", {"rule": "ti:diffusion"}, page=path)
    site.deliver()
    page = site.http.get(path)
    assert page.text.count("Not counted yet") == 1
    site.clock.advance(days=1)
    site.deliver()
    page = site.http.get(path)
    assert "Not counted yet" not in page.text and "(counted on 29 Nov 2024)" in page.text


def test_counts_reuse_the_digests_matches_when_they_cover_the_week(site: Site) -> None:
    ada = site.subscriber("ada")
    parsed = [(ada, [parse_rule(text) for text in ada.rules])]
    assert refresh_rule_counts(site.store, parsed, now=site.clock()) == 1
    alone = site.store.rule_counts.get(ada.id)
    assert refresh_rule_counts(site.store, parsed, now=site.clock()) == 0  # counted today
    latest = site.store.papers.latest_announcement()
    assert latest is not None
    first = latest - timedelta(days=20)
    papers = site.store.papers.announced_since(first)
    from bot.match.digest import match_rules

    matches = match_rules(parsed[0][1], papers)
    later = site.clock() + timedelta(days=1)
    assert refresh_rule_counts(site.store, parsed, now=later, shared=(first, papers, matches)) == 1
    shared = site.store.rule_counts.get(ada.id)
    assert {k: (v.matched, v.papers, v.examples, v.first) for k, v in shared.items()} == {
        k: (v.matched, v.papers, v.examples, v.first) for k, v in alone.items()
    }
    assert all(c.counted_at == later for c in shared.values())


def test_a_burst_of_rule_checks_is_throttled_with_429(site: Site) -> None:
    answers = [
        site.http.post("/rules/check", data={"rule": f"robot{n}"}).status_code for n in range(40)
    ]
    assert answers[:30] == [200] * 30 and set(answers[30:]) == {429}
    refused = site.http.post("/rules/check", data={"rule": "robot"})
    assert refused.json()["ok"] is False and "too many checks" in refused.json()["message"]
    assert refused.headers["retry-after"] == "60"
    site.clock.advance(minutes=2)
    assert site.http.post("/rules/check", data={"rule": "robot"}).status_code == 200
