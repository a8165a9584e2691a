"""Rules on the command line: a rule may start with "-" (`-survey robot`, as the manual
teaches) before, after or among the options of `try` and `subscribe`, and the options
still work; fuzzed with Hypothesis."""

from __future__ import annotations

import functools
from pathlib import Path

import click
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from support.cli import outcome

from bot.cli.people import subscribe
from bot.cli.shell import arguments_last, option_arity
from bot.cli.trial import try_

OPTIONS = {"-c": 1, "--config": 1, "--since": 1, "--demo": 0, "--limit": 1, "-h": 0, "-v": 0}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-survey robot", "--demo"], ["--demo", "--", "-survey robot"]),
        (["--demo", "-survey robot"], ["--demo", "--", "-survey robot"]),
        (["--demo", "--", "-survey robot"], ["--demo", "--", "-survey robot"]),
        (["--", "-survey robot", "--demo", "-vv"], ["--demo", "--", "-survey robot", "-vv"]),
        (["--", "--dmeo", "--", "-c", "x"], ["-c", "x", "--", "--dmeo", "--"]),
        (["-survey", "--limit", "5", "--demo"], ["--limit", "5", "--demo", "--", "-survey"]),
        (["--limit=5", "-x", "-c", "-odd.toml"], ["--limit=5", "-c", "-odd.toml", "--", "-x"]),
        (["-chair", "-vv", "-hv"], ["-vv", "-hv", "--", "-chair"]),  # -chair: no -c hair
        (["robot", "--dmeo"], ["--dmeo", "--", "robot"]),  # unknown: click says so
        (["robot", "--since"], ["--since", "--", "robot"]),  # click: needs a value
        (["--", "robot", "-c"], ["--", "robot", "-c"]),  # no value after it: a rule
        (["-", "--"], ["--", "-"]),
        (["--"], []),
        ([], []),
    ],
)
def test_words_that_are_no_option_are_arguments(args: list[str], expected: list[str]) -> None:
    assert arguments_last(args, OPTIONS) == expected


def _tried(out: str) -> str:
    return out.rsplit("\n", 2)[-2]


def test_try_takes_a_rule_that_starts_with_a_dash_wherever_it_stands() -> None:
    results = [
        outcome("try", "-survey robot", "--demo", "--limit", "1"),
        outcome("try", "--demo", "-survey robot", "--limit", "1"),
        outcome("try", "--demo", "--limit", "1", "--", "-survey robot"),
        outcome("try", "--", "-survey robot", "--demo", "--limit", "1"),  # `--` not needed
    ]
    assert {code for code, _ in results} == {0}, results
    assert len({out for _, out in results}) == 1
    out = results[0][1]
    assert out.startswith("rule: -survey robot\n")
    assert "papers matched" in _tried(out)
    # Alone, -survey is a rule the rule language refuses, and says why: no usage error.
    code, out = outcome("try", "-survey", "--demo")
    assert code == 2 and "No such option" not in out
    assert "exclusions alone match everything" in out
    # A rule's first letter that is also an option's (-c, -h, -v) is still the rule's.
    for rule in ("-chair robot", "-hand robot", "-vision robot"):
        code, out = outcome("try", rule, "--demo", "--limit", "1")
        assert code == 0 and out.startswith(f"rule: {rule}\n"), out
    # Options stay options: a typo is a usage error with a suggestion.
    code, out = outcome("try", "robot", "--dmeo")
    assert code == 2 and "No such option '--dmeo'. Did you mean '--demo'?" in out


@pytest.mark.database
def test_subscribe_takes_rules_that_start_with_a_dash(tmp_path: Path, database_url: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f'version = 1\n[database]\nurl = "{database_url}"\n[email]\nfrom = "a@b.org"\n'
    )
    cli = functools.partial(outcome, config=config)
    code, out = cli("subscribe", "bob", "-survey robot", "--email", "bob@example.org")
    assert code == 0, out
    assert "1. -survey robot" in out
    code, out = cli("subscribe", "bob", "--max-papers", "5", "-review grasping")
    assert code == 0 and "2. -review grasping" in out
    code, out = cli("subscribe", "bob", "-survey")
    assert code == 2 and "exclusions alone match everything" in out


def _parsed(command: click.Command, args: list[str]) -> dict[str, object]:
    with command.make_context(command.name or "", args) as ctx:
        return dict(ctx.params)


def _is_option_like(word: str, command: click.Command) -> bool:
    with click.Context(command) as ctx:
        arity = option_arity(command, ctx)
    flags = {name[1] for name, takes in arity.items() if takes == 0 and len(name) == 2}
    return (
        word in arity
        or word.partition("=")[0] in arity
        or (word.startswith("--") and len(word) > 2)
        or (len(word) > 2 and word[0] == "-" and set(word[1:]) <= flags)
        or word == "--"
    )


rule_words = st.text(min_size=1, max_size=40) | st.from_regex(r"-[a-z\"(: ]{1,20}", fullmatch=True)
try_options = st.lists(
    st.sampled_from(
        [["--demo"], ["--limit", "3"], ["--limit=0"], ["-c", "-x.toml"], ["--no-color"]]
    ),
    max_size=4,
)


@given(rule=rule_words, options=try_options, where=st.integers(0, 5), dashes=st.booleans())
@example(rule="-survey robot", options=[["--demo"]], where=1, dashes=False)
@example(rule="-chair", options=[["-c", "c.toml"]], where=0, dashes=False)
@example(rule="-v", options=[], where=0, dashes=True)
def test_try_parses_any_rule_text_among_any_options(
    rule: str, options: list[list[str]], where: int, dashes: bool
) -> None:
    words = [word for option in options for word in option]
    if dashes:  # after "--", anything but an option's exact name is the rule
        with click.Context(try_) as ctx:
            if rule in option_arity(try_, ctx) or rule.partition("=")[0] in option_arity(try_, ctx):
                return
        args = [*words, "--", rule]
    else:
        if _is_option_like(rule, try_):
            return  # an option's name, or an unknown --option: click's business
        cut = min(where, len(options))
        before, after = options[:cut], options[cut:]
        args = [*(w for o in before for w in o), rule, *(w for o in after for w in o)]
    params = _parsed(try_, args)
    assert params["rule_text"] == rule
    assert params["use_demo"] == (["--demo"] in options)


@given(
    name=st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True),
    rules=st.lists(rule_words, min_size=1, max_size=4),
    where=st.integers(0, 4),
)
@example(name="ada", rules=["-survey robot", "-x"], where=1)
def test_subscribe_keeps_its_rules_in_order_among_options(
    name: str, rules: list[str], where: int
) -> None:
    if any(_is_option_like(rule, subscribe) for rule in rules):
        return
    options = ["--email", "-odd@example.org", "--max-papers", "5"]
    positional = [name, *rules]
    cut = min(where, len(positional))
    params = _parsed(subscribe, [*positional[:cut], *options, *positional[cut:]])
    assert params["name"] == name and params["rules"] == tuple(rules)
    assert params["email"] == "-odd@example.org" and params["max_papers"] == 5
