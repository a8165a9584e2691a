"""Rule labels (issue 21): a rule may have a short name, from every place a rule is made (the
config file, `paperbell subscribe`, Slack's `/papers`, the manage page); each entry point
checks it the same way (`bot.core.checks.check_label`) and refuses a bad one clearly, at
its key, losing nothing; the store keeps it."""

from __future__ import annotations

import asyncio
import re
import tempfile
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.cli import invoke
from support.config import sink_email, slack_config, toml_table
from support.pages import Site
from support.servers import Route, feed_server, smtp_sink
from support.slack import wired_slack_app

from bot.config import load_config, parse_config
from bot.core.checks import MAX_LABEL_LENGTH, check_label
from bot.core.errors import ConfigError
from bot.demo.slack_standin import SlackStandIn
from bot.slack.commands import SlashCommands
from bot.slack.messages import CommandRequest
from bot.slack.syntax import usage
from bot.store import Store

MARL = 'marl OR "multi-agent reinforcement learning"'

# Labels as a hostile user writes them: NUL and other controls, a line break (a header
# injection in the subject), bidi overrides, zero-width and private-use characters, lone
# surrogates, stacked accents, huge ones, blank ones, and good ones in any script.
HOSTILE_LABELS = [
    "multi-agent RL",
    "  diffusion \t policy  ",
    "Schro\u0308dinger",  # decomposed: kept composed
    "機器人學習",
    "🤖 robots",
    "R&D <b>",
    "a\x00b",
    "evil\r\nBcc: x@y.example",
    "\x1b[31mred",
    "\u202egnp.exe",
    "zero\u200bwidth",
    "\ue000private",
    "\ud800",
    "line\u2028break",
    "Z\u0301\u0302\u0303\u0304algo",
    "x" * (MAX_LABEL_LENGTH + 1),
    "x" * 5000,
    "",
    "   ",
    "--",
]
LABEL_TEXTS = st.one_of(
    st.sampled_from(HOSTILE_LABELS),
    st.text(max_size=60),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=50),
)


# Unicode's White_Space, which the config strips from its strings (str.strip also strips
# U+001C..U+001F, which are no white space).
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)


def expected_label(text: str) -> tuple[str | None, str | None]:
    """What a label should give, worked out apart from `check_label`: the label kept, or
    the start of the refusal."""
    for char in text:
        if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") and (
            char not in " \t"
        ):
            return None, f"a label cannot hold the character U+{ord(char):04X}"
    kept = " ".join(unicodedata.normalize("NFC", text).split())
    if not kept:
        return None, "a label cannot be empty"
    if len(kept) > MAX_LABEL_LENGTH or len(text) > 4 * MAX_LABEL_LENGTH:
        return None, f"a label can be at most {MAX_LABEL_LENGTH} characters long"
    return kept, None


def _refusal(text: str) -> str | None:
    try:
        check_label(text)
    except ValueError as exc:
        return str(exc)
    return None


# -- the check every entry point goes through ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("multi-agent RL", "multi-agent RL"),
        ("  diffusion \t policy  ", "diffusion policy"),
        ("Schro\u0308dinger", "Schrödinger"),
        ("non\u00a0breaking", "non breaking"),
        ("🤖 robots", "🤖 robots"),
        ("R&D <b>", "R&D <b>"),
        ("x" * MAX_LABEL_LENGTH, "x" * MAX_LABEL_LENGTH),
    ],
)
def test_a_label_is_kept_as_one_tidy_line(text: str, kept: str) -> None:
    assert check_label(text) == kept


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ("a\x00b", "a label cannot hold the character U+0000 (a control character)"),
        ("evil\r\nBcc: x", "a label cannot hold the character U+000D (a control character)"),
        ("\u202egnp", "U+202E (an invisible formatting character)"),
        ("zero\u200bwidth", "U+200B (an invisible formatting character)"),
        ("\ue000x", "U+E000 (a private-use character)"),
        ("\ud800", "U+D800 (a lone surrogate)"),
        ("a\u2028b", "U+2028 (a line separator)"),
        ("\U000e0001tag", "U+E0001 (an invisible formatting character)"),
        ("Z\u0301\u0302\u0303algo", "a label cannot stack more than 2 accents"),
        ("x" * 41, "a label can be at most 40 characters long (this one has 41)"),
        ("x" * 5000, "a label can be at most 40 characters long (this one has 5000)"),
        (" \t ", "a label cannot be empty: leave it out for none"),
        ("--", "a label needs a letter, a digit or a symbol"),
    ],
)
def test_a_bad_label_is_refused_saying_why(text: str, refusal: str) -> None:
    with pytest.raises(ValueError) as info:
        check_label(text)
    assert refusal in str(info.value)
    assert "\x00" not in str(info.value) and len(str(info.value)) < 120


# -- the config file ----------------------------------------------------------------------------


def config_data(rules: list[Any]) -> dict[str, Any]:
    return {
        "version": 1,
        "email": {"from": "paperbell <papers@example.org>"},
        "subscribers": [{"name": "ada", "email": "ada@example.org", "rules": rules}],
    }


def problems(rules: list[Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(config_data(rules), environ={})
    return info.value.problems


def test_a_rule_is_a_string_or_a_table_with_a_label() -> None:
    config = parse_config(
        config_data(["robot cat:cs.RO", {"rule": MARL, "label": " multi-agent  RL "}]),
        environ={},
    )
    (ada,) = config.declared_subscribers()
    assert ada.rules == ("robot cat:cs.RO", MARL)
    assert ada.labels == {MARL: "multi-agent RL"}
    assert ada.label_of(MARL) == "multi-agent RL" and ada.label_of("robot cat:cs.RO") is None
    unlabelled = parse_config(config_data([{"rule": "robot"}]), environ={})
    assert unlabelled.declared_subscribers()[0].labels == {}


def test_every_problem_of_a_labelled_rule_is_at_its_key() -> None:
    found = problems(
        [
            "robot",
            {"rule": "drone", "label": "a\x00b"},
            {"rule": '"unclosed', "label": "fine"},
            {"label": "no rule"},
            {"rule": "swarm", "name": "typo"},
            5,
            ["robot"],
        ]
    )
    assert found[0] == (
        "subscribers[0].rules[1].label: a label cannot hold the character U+0000 "
        "(a control character)"
    )
    assert found[1].startswith('subscribers[0].rules[2].rule: missing closing "')
    assert found[2:] == [
        "subscribers[0].rules[3].rule: required key is missing",
        "subscribers[0].rules[4].name: unknown key 'name'",
        'subscribers[0].rules[5]: write a rule as a string, or as { rule = "...", label = "..." }',
        'subscribers[0].rules[6]: write a rule as a string, or as { rule = "...", label = "..." }',
    ]


def test_two_rules_with_one_label_are_refused() -> None:
    found = problems([{"rule": "robot", "label": "Bots"}, "x", {"rule": "drone", "label": "bots"}])
    assert found == [
        "subscribers[0]: rules[2].label repeats rules[0].label ('bots'): "
        "give each rule its own label"
    ]
    assert problems(["robot", {"rule": "robot ", "label": "x"}]) == [
        "subscribers[0]: rules[1] repeats rules[0] ('robot')"
    ]


def test_a_labelled_rule_reads_from_a_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        'version = 1\n[email]\nfrom = "paperbell <papers@example.org>"\n'
        '[[subscribers]]\nname = "ada"\nemail = "ada@example.org"\n'
        'rules = ["robot cat:cs.RO", { rule = "marl OR \\"multi-agent reinforcement '
        'learning\\"", label = "multi-agent RL" }]\n'
    )
    (ada,) = load_config(path, environ={}).declared_subscribers()
    assert ada.labels == {MARL: "multi-agent RL"}


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(label=LABEL_TEXTS)
@example(label="a\x00b")
@example(label="evil\r\nBcc: x@y.example")
@example(label="x" * 5000)
@example(label="\u202egnp")
def test_any_label_in_the_config_is_kept_tidy_or_refused_at_its_key(label: str) -> None:
    stripped = label.strip(WHITE_SPACE)  # the file's strings are stripped first
    kept, refusal = expected_label(stripped)
    data = config_data(["robot", {"rule": MARL, "label": label}])
    if refusal is None and _refusal(stripped) is None:
        (ada,) = parse_config(data, environ={}).declared_subscribers()
        assert ada.labels == {MARL: kept}
        shown = ada.labels[MARL]
        assert shown.isprintable() and len(shown) <= MAX_LABEL_LENGTH and shown == shown.strip()
        return
    with pytest.raises(ConfigError) as info:
        parse_config(data, environ={})
    (problem,) = info.value.problems
    if any("\ud800" <= char <= "\udfff" for char in label):  # no str to pydantic: its words
        assert problem.startswith("subscribers[0].rules[1].label: Input should be a valid string")
        return
    assert problem.startswith("subscribers[0].rules[1].label: a label "), problem
    if refusal is not None:
        assert refusal in problem, (refusal, problem)
    assert "\x00" not in problem and "\r" not in problem and len(problem) < 200


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(label=LABEL_TEXTS, quote=st.booleans())
@example(label="a\x00b", quote=True)
@example(label='" label = "x', quote=False)
def test_any_label_in_a_config_file_gives_a_config_or_a_config_error(
    label: str, quote: bool
) -> None:
    """The label written into the TOML text as it comes (`quote=False`: raw, so it may
    break the file) or as a TOML string."""
    import json

    written = json.dumps(label) if quote else f'"{label}"'
    text = (
        'version = 1\n[email]\nfrom = "paperbell <papers@example.org>"\n'
        '[[subscribers]]\nname = "ada"\nemail = "ada@example.org"\n'
        f'rules = ["robot", {{ rule = "drone", label = {written} }}]\n'
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.toml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            config = load_config(path, environ={})
        except ConfigError as exc:
            assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)
            return
    (ada,) = config.declared_subscribers()
    assert set(ada.labels) <= {"drone"}
    assert all(check_label(shown) == shown for shown in ada.labels.values())


# -- `paperbell subscribe` and `list` -----------------------------------------------------------


def cli_config(folder: Path, database_url: str) -> Path:
    config = folder / "config.toml"
    config.write_text(
        f'version = 1\n\n[database]\nurl = "{database_url}"\n\n'
        '[email]\nfrom = "paperbell <papers@example.org>"\n\n'
        '[[subscribers]]\nname = "lab"\nemail = "lab@example.org"\n'
        'rules = ["robot", { rule = "hf:top5", label = "the day\'s top five" }]\n'
    )
    return config


@pytest.mark.database
def test_subscribe_labels_rules_in_order_and_list_shows_both(
    tmp_path: Path, database_url: str
) -> None:
    config = cli_config(tmp_path, database_url)
    done = invoke(
        "subscribe",
        "ada",
        "--email",
        "ada@example.org",
        MARL,
        "robot",
        "--label",
        " multi-agent  RL ",
        config=config,
    )
    assert done.exit_code == 0, done.output
    assert f"  1. multi-agent RL: {MARL}\n  2. robot\n" in done.output
    # A rule given again with a label is relabelled; '' leaves a rule without one.
    done = invoke(
        "subscribe", "ada", MARL, "robot", "--label", "", "--label", "Robots", config=config
    )
    assert done.exit_code == 0, done.output
    assert f"  1. multi-agent RL: {MARL}\n  2. Robots: robot\n" in done.output
    listed = invoke("list", config=config)
    assert listed.exit_code == 0, listed.output
    assert "    1. robot\n    2. the day's top five: hf:top5\n" in listed.output  # the file's
    assert f"    1. multi-agent RL: {MARL}\n    2. Robots: robot\n" in listed.output
    assert '"robot"' not in listed.output and '"hf:top5"' not in listed.output


@pytest.mark.database
def test_subscribe_refuses_a_bad_label_and_stores_nothing(
    tmp_path: Path, database_url: str
) -> None:
    config = cli_config(tmp_path, database_url)
    for labels, problem in (
        (["a\x00b"], "rules[0].label: a label cannot hold the character U+0000"),
        (["evil\r\nBcc: x"], "rules[0].label: a label cannot hold the character U+000D"),
        (["x" * 41], "rules[0].label: a label can be at most 40 characters long"),
        (["a", "b"], "--label: 2 labels for 1 RULE: the first --label names"),
    ):
        args = [arg for label in labels for arg in ("--label", label)]
        done = invoke(
            "subscribe", "ada", "--email", "ada@example.org", "robot", *args, config=config
        )
        assert done.exit_code == 2 and done.output.startswith("error: "), done.output
        assert problem in done.output and "\x00" not in done.output
    done = invoke(
        "subscribe",
        "ada",
        "--email",
        "ada@example.org",
        "a",
        "b",
        "--label",
        "same",
        "--label",
        "Same",
        config=config,
    )
    assert done.exit_code == 2 and "rules[1].label repeats rules[0].label" in done.output
    assert invoke("subscribe", "ada", "--email", "a@example.org", "a", config=config).exit_code == 0
    done = invoke("subscribe", "ada", "b", "--label", "dup", config=config)
    assert done.exit_code == 0, done.output
    done = invoke("subscribe", "ada", "c", "--label", "DUP", config=config)
    assert done.exit_code == 1 and "has a rule labelled 'DUP' already" in done.output

    with Store.open(database_url) as store:
        assert store.subscribers.rule_texts("ada") == ["a", "b"]


# -- Slack's /papers ----------------------------------------------------------------------------

ADA = "U07ADA123"
NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)


@contextmanager
def slash_commands(database_url: str) -> Iterator[SlashCommands]:
    with SlackStandIn() as standin:
        standin.add_user(ADA, "ada", email="ada@lab.example", tz="Europe/London")
        config = slack_config(standin, database_url, [])
        with Store.open(config.database_url()) as store:
            built = wired_slack_app(config, store, clock=lambda: NOW)
            assert built is not None
            yield built.responder.commands
            store.database.engine.dispose()


@pytest.fixture
def commands(database_url: str) -> Iterator[SlashCommands]:
    with slash_commands(database_url) as made:
        yield made


def say(commands: SlashCommands, text: str) -> str:
    reply = asyncio.run(commands.handle(CommandRequest(text=text, user_id=ADA)))
    assert reply.text
    return reply.text


def labels_of(commands: SlashCommands) -> dict[str, str]:
    ada = commands.subscriptions.subscriber("slack.ada")
    return dict(ada.labels) if ada is not None else {}


@pytest.mark.database
def test_slack_subscribes_a_rule_as_a_label_and_lists_both(commands: SlashCommands) -> None:
    said = say(commands, f"subscribe {MARL} as multi-agent RL")
    assert said.startswith(f"Welcome! Subscribed to `{MARL}` as *multi-agent RL* (you have 1 rule)")
    assert labels_of(commands) == {MARL: "multi-agent RL"}
    said = say(commands, 'subscribe "learning as inference"')  # a quoted "as" is the rule's
    assert said.startswith('Subscribed to `"learning as inference"` (you have 2 rules)')
    said = say(commands, 'subscribe robot* as "Robots *and* arms"')
    assert "as *Robots \u2217and\u2217 arms*" in said
    listed = say(commands, "list")
    assert f'1. *multi-agent RL*: `{MARL}`\n2. `"learning as inference"`\n' in listed
    assert "3. *Robots \u2217and\u2217 arms*: `robot*`" in listed
    # The same rule again with a label relabels it; without one, it is there already.
    said = say(commands, "subscribe robot*   as Robots")
    assert said.startswith("Subscribed to `robot*` as *Robots* (you have 3 rules)")
    assert say(commands, "subscribe robot*").startswith(":warning: that rule is already")
    assert labels_of(commands)["robot*"] == "Robots"


@pytest.mark.database
def test_slack_label_names_a_rule_or_takes_its_label_away(commands: SlashCommands) -> None:
    say(commands, "subscribe robot")
    say(commands, "subscribe drone")
    assert say(commands, "label 2 UAVs") == "Rule 2, `drone`, is now shown as *UAVs*."
    assert say(commands, 'label 1 "robots & arms"') == (
        "Rule 1, `robot`, is now shown as *robots &amp; arms*."
    )
    assert labels_of(commands) == {"drone": "UAVs", "robot": "robots & arms"}
    assert say(commands, "label 2 off") == "Rule 2, `drone`, is shown in words again."
    assert labels_of(commands) == {"robot": "robots & arms"}
    for text in ("label", "label 2", "label two UAVs"):
        assert say(commands, text).startswith(":warning: Say which rule and its label: ")
    assert say(commands, "label 7 x") == ":warning: 'slack.ada' has no rule 7 (it has 2)"
    said = say(commands, "label 2 Robots & Arms")
    assert said.startswith(":warning: 'slack.ada' has a rule labelled 'Robots &amp; Arms' already")
    assert "label" in usage("/papers") and "as LABEL" in usage("/papers")


@pytest.mark.database
def test_slack_refuses_a_bad_label_and_changes_nothing(commands: SlashCommands) -> None:
    for text, problem in (
        ("subscribe robot as a\x00b", "U+0000 (a control character)"),
        ("subscribe robot as \u202egnp", "U+202E (an invisible formatting character)"),
        ("subscribe robot as " + "x" * 41, "at most 40 characters long (this one has 41)"),
        ('subscribe robot as ""', "a label cannot be empty"),
    ):
        said = say(commands, text)
        assert said.startswith(":warning: That label cannot be used: a label "), said
        assert problem in said and "\x00" not in said and "\u202e" not in said
    assert commands.subscriptions.subscriber("slack.ada") is None
    say(commands, "subscribe robot")
    said = say(commands, "label 1 zero\u200bwidth")
    assert said.startswith(":warning: That label cannot be used: a label cannot hold the charac")
    assert labels_of(commands) == {}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(label=LABEL_TEXTS)
@example(label="a\x00b")
@example(label="<!channel> *bold*")
@example(label="x" * 5000)
@example(label="\u202egnp")
@example(label='"quoted"')
def test_slack_answers_any_label_with_it_kept_or_a_clear_refusal(
    database_url: str, label: str
) -> None:
    with slash_commands(database_url) as commands:
        if commands.store.subscribers.get("slack.ada") is not None:  # an earlier example's
            commands.store.subscribers.delete("slack.ada")
        said = say(commands, f"subscribe robot as {label}")
        typed = label.strip()
        if typed[:1] == typed[-1:] == '"' and len(typed) >= 2:
            typed = typed[1:-1]
        ada = commands.subscriptions.subscriber("slack.ada")
        assert "\x00" not in said and "<!channel>" not in said
        if not label.strip():  # nothing after "as": "as" is the rule's last word
            assert ada is not None and ada.rules == ("robot as",) and ada.labels == {}
            return
        refusal = _refusal(typed)
        if refusal is not None:
            assert said.startswith(":warning: That label cannot be used: a label "), said
            assert ada is None  # nothing stored
            return
        assert ada is not None and ada.rules == ("robot",), said
        assert ada.labels == {"robot": check_label(typed)}
        assert said.startswith("Welcome! Subscribed to `robot` as *")


# -- the manage page ----------------------------------------------------------------------------


@pytest.mark.database
def test_the_manage_page_adds_edits_and_shows_a_label_beside_its_rule(site: Site) -> None:
    path = site.link("manage", "ada")
    added = site.post(path + "/add", {"rule": MARL, "label": " multi-agent  RL "}, page=path)
    assert added.status_code == 303, added.text
    assert site.subscriber("ada").labels == {MARL: "multi-agent RL"}
    page = site.http.get(path).text
    shown = MARL.replace('"', "&#34;")  # as Jinja escapes it: the rule itself, in code style
    assert (
        f'<strong class="label">multi-agent RL</strong> <span class="rule">{shown}</span>' in page
    )
    assert 'name="label" value="multi-agent RL"' in page  # the edit form has it
    edited = site.post(
        path + "/edit", {"number": "2", "rule": "robot cat:cs.RO", "label": "Robots"}, page=path
    )
    assert edited.status_code == 303, edited.text
    blanked = site.post(path + "/edit", {"number": "3", "rule": MARL, "label": " "}, page=path)
    assert blanked.status_code == 303, blanked.text
    assert site.subscriber("ada").labels == {"robot cat:cs.RO": "Robots"}
    # A config file's subscriber shows its labels too, and cannot change them here.
    lab = site.http.get(site.link("manage", "lab")).text
    assert '<span class="rule">&#34;diffusion policy&#34;</span>' in lab


@pytest.mark.database
def test_the_manage_page_refuses_a_bad_label_with_400_and_keeps_what_was_typed(
    site: Site,
) -> None:
    path = site.link("manage", "ada")
    site.post(
        path + "/edit", {"number": "2", "rule": "robot cat:cs.RO", "label": "Robots"}, page=path
    )
    for label, problem in (
        ("a\x00b", "a label cannot hold the character U+0000 (a control character)"),
        ("x" * 41, "a label can be at most 40 characters long (this one has 41)"),
        ("zero\u200bwidth", "a label cannot hold the character U+200B (an invisible formatt"),
        ("robots", "another of your rules is labelled &#39;robots&#39;"),
    ):
        added = site.post(path + "/add", {"rule": "drone", "label": label}, page=path)
        assert added.status_code == 400, (label, added.text)
        assert "That label cannot be used: " + problem in added.text, added.text
        assert 'id="new-rule" name="rule"' in added.text and 'value="drone"' in added.text
        assert 'id="new-label" name="label"' in added.text and 'aria-invalid="true"' in added.text
    edited = site.post(path + "/edit", {"number": "1", "rule": "x", "label": "a\x00"}, page=path)
    assert edited.status_code == 400 and "That label cannot be used" in edited.text
    bad_rule = site.post(path + "/add", {"rule": "a OR (b", "label": "fine"}, page=path)
    assert bad_rule.status_code == 400 and "That rule does not parse" in bad_rule.text
    assert 'value="fine"' in bad_rule.text  # the label typed is given back too
    ada = site.subscriber("ada")
    assert len(ada.rules) == 2 and ada.labels == {"robot cat:cs.RO": "Robots"}


# -- a labelled rule's digest, end to end -------------------------------------------------------


@pytest.mark.database
def test_a_digest_shows_labels_in_the_subject_and_headings_over_smtp(
    tmp_path: Path, database_url: str, full_feed_bytes: bytes
) -> None:
    """The real day through the CLI and SMTP: the subject says how many papers under which
    labels (or rules in words) on which day; headings show the label, the footer too; no
    rule's syntax is shown to the reader."""
    with feed_server() as feed, smtp_sink() as (sink, port):
        feed.routes["/rss/all"] = Route(full_feed_bytes)
        config = tmp_path / "config.toml"
        config.write_text(
            f'version = 1\n[database]\nurl = "{database_url}"\n'
            f'[[sources]]\nkind = "arxiv"\ncategories = ["hep-ph", "quant-ph"]\n'
            f'url = "{feed.url("/rss/all")}"\n'
            + toml_table("email", sink_email(port, timeout=5))
            + '\n[[subscribers]]\nname = "ada"\nemail = "ada@lab.example"\n'
            'rules = [{ rule = "tetraquark OR pentaquark", label = "Exotic hadrons" }, '
            "'\"quantum error correction\"']\n"
        )
        assert invoke("poll", config=config).exit_code == 0
        sent = invoke("digest", "--since", "2024-11-28", config=config)
        assert sent.exit_code == 0, sent.output
        (message,) = sink.messages
    # Unfolded as read: the standard library folds a long subject before an encoded word
    # (the dash) keeping the space before the fold too; a mail app shows one space.
    subject = " ".join(str(message["Subject"]).split())
    assert re.fullmatch(
        r"\d+ new papers: Exotic hadrons, quantum error correction \u2014 Thu 28 Nov", subject
    ), subject
    text = message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    page = message.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert re.search(r"== Exotic hadrons · \d+ papers? ==", text)
    assert "Matched:" not in text  # a paper names only the rules beyond its heading
    assert "matching Exotic hadrons, quantum error correction." in " ".join(text.split())
    assert "tetraquark OR pentaquark" not in text + page
    assert '"quantum error correction"' not in text + page and "<code>" not in page
    with Store.open(database_url) as store:  # the file's labels, mirrored in the store
        (ada,) = store.subscribers.all(load_config(config, environ={}).declared_subscribers())
        assert store.subscribers.rule_texts("ada") == [
            "tetraquark OR pentaquark",
            '"quantum error correction"',
        ]
    assert ada.labels == {"tetraquark OR pentaquark": "Exotic hadrons"}
