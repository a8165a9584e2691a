"""Apprise destinations where people give them: the config file (`apprise`, `apprise_env`,
checked by `paperbell check-config` offline, every problem at its key path and at once,
no secret in the file, no URL shown unmasked), and the command line (`subscribe --apprise
--apprise-env`, `unsubscribe --apprise`, `resume`, `list`); hostile values of every type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cli import outcome

from bot.core.errors import ConfigError
from bot.pipeline.wiring import parse_config, targets
from bot.store import Store

TOKEN = "s3cr3tT0kenAbcdef123"


def data(**subscriber: Any) -> dict[str, Any]:
    sub = {"name": "ada", "rules": ["robot"], **subscriber}
    return {"version": 1, "subscribers": [sub]}


def problems(raw: dict[str, Any], environ: dict[str, str] | None = None) -> list[str]:
    try:
        parse_config(raw, environ=environ or {})
    except ConfigError as exc:
        return exc.problems
    return []


def test_urls_in_the_file_and_a_variable_make_one_target_each() -> None:
    config = parse_config(
        data(apprise=["ntfy://ntfy.example/papers", "json://hooks.example/x"], apprise_env="CHATS"),
        environ={"CHATS": f"mmost://chat.example/{TOKEN}"},
    )
    (sub,) = config.declared_subscribers()
    found = targets(config, sub)
    assert [t.label for t in found] == [
        "apprise ntfy://ntfy.example/papers",
        "apprise json://hooks.example/x",
        "apprise mmost://chat.example/s...3/",
    ]
    assert all(t.channel.startswith("apprise:") and TOKEN not in t.recipient for t in found)
    assert "apprise" in repr(sub) and TOKEN not in repr(config.declared_subscribers())


def test_check_config_names_each_bad_url_at_its_key_every_problem_at_once() -> None:
    found = problems(
        data(
            apprise=[
                "ntfy://ntfy.example/papers",
                "nosuchservice://x",
                f"mmost://chat.example/{TOKEN}",
                "ntfy://ntfy.example/papers?priority=high",
            ],
            apprise_env="CHATS",
        )
        | {"digest": {"window_days": 0}},
        environ={"CHATS": f"json://hooks.example/x discord://{TOKEN}"},
    )
    text = "\n".join(found)
    assert "subscribers[0].apprise[1]: nosuchservice://…:" in text
    assert (
        "subscribers[0].apprise[2]: mmost://chat.example/s...3/ carries a secret (shown masked): "
        "keep it out of the file: put it in an environment variable and name that variable in "
        "apprise_env"
    ) in text
    assert (
        "subscribers[0].apprise[3]: ntfy://ntfy.example/papers is the same destination as "
        "apprise[0]"
    ) in text
    assert "subscribers[0].apprise_env: CHATS's URL 2: discord://…:" in text
    assert "digest.window_days" in text  # the schema's problems come with them
    assert TOKEN not in text


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (5, "subscribers[0].apprise: Input should be a valid list"),
        ([1], "subscribers[0].apprise[0]: Input should be a valid string"),
        ([""], "subscribers[0].apprise[0]: String should have at least 1 character"),
        (["x" * 5000], "subscribers[0].apprise[0]: String should have at most 4096 characters"),
        ([f"ntfy://h.example/t{n}" for n in range(21)], "subscribers[0].apprise: List should"),
    ],
)
def test_wrong_types_are_the_schemas_to_say(value: Any, expected: str) -> None:
    found = problems(data(apprise=value))
    assert any(p.startswith(expected) for p in found), found


def test_apprise_env_must_name_a_variable_and_an_unset_one_waits(tmp_path: Path) -> None:
    assert any(
        p.startswith("subscribers[0].apprise_env: '1 BAD' is not an environment variable")
        for p in problems(data(apprise_env="1 BAD"))
    )
    assert "subscribers[0].apprise_env: CHATS is empty" in "\n".join(
        problems(data(apprise_env="CHATS"), {"CHATS": "  "})
    )
    config = parse_config(data(apprise_env="CHATS"), environ={})
    (sub,) = config.declared_subscribers()
    (target,) = targets(config, sub)
    assert target.problem == "the variable CHATS (apprise_env) is not set in this process"
    # ... and no command refuses to start for it: the daemon's other digests go, `serve`
    # sends none, `digest` skips those destinations (check-config says so).
    from bot.cli.secrets import COMMAND_SECRETS, secrets_of, who_needs
    from bot.config.secrets import APPRISE_URLS

    assert all(APPRISE_URLS not in secrets_of(config, command) for command in COMMAND_SECRETS)
    (missing,) = config.missing(APPRISE_URLS)
    assert "wait until it is set" in who_needs(config, missing)


JUNK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=50)
    | st.sampled_from(["\x00", "ntfy://\x00", "\u202e://x", "json://" + "é" * 100, "::://"]),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=5), children)
    ),
    max_leaves=12,
)


@given(apprise=JUNK, env=JUNK, value=st.text(max_size=300))
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_hostile_values_are_problems_never_a_crash(apprise: Any, env: Any, value: str) -> None:
    raw = data(apprise=apprise, apprise_env=env)
    environ = {"CHATS": value.replace("\x00", "")}
    if isinstance(env, str):
        environ[env] = value.replace("\x00", "")
    try:
        parse_config(raw, environ=environ)
    except ConfigError as exc:
        assert all(isinstance(p, str) and p for p in exc.problems)


# -- the command line ---------------------------------------------------------------------


@pytest.fixture
def config_file(tmp_path: Path, database_url: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'version = 1\n[database]\nurl = "{database_url}"\n')
    return path


@pytest.mark.database
def test_subscribe_with_apprise_urls_and_a_variable_then_remove_and_list(
    config_file: Path, database_url: str
) -> None:
    def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
        return outcome(*args, config=config_file, env=env)

    code, out = cli("subscribe", "lab", "--apprise", f"discord://123456789/{TOKEN}", "robot")
    assert code == 2 and "--apprise: discord://1...9/s...3/ carries a secret" in out
    assert TOKEN not in out
    code, out = cli("subscribe", "lab", "--apprise", "nosuch://x", "robot")
    assert code == 2 and "--apprise: nosuch://…:" in out
    code, out = cli("subscribe", "lab", "--apprise-env", "bad name", "robot")
    assert code == 2 and "--apprise-env: 'bad name' is not an environment variable" in out

    code, out = cli(
        "subscribe",
        "lab",
        "--apprise",
        "ntfy://ntfy.example/papers",
        "--apprise-env",
        "LAB_CHATS",
        "robot",
        env={"LAB_CHATS": f"mmost://chat.example/{TOKEN}"},
    )
    assert code == 0, out
    assert (
        "subscribed lab apprise ntfy://ntfy.example/papers + apprise mmost://chat.example/" in out
    )
    assert TOKEN not in out
    code, out = cli("list", env={"LAB_CHATS": f"mmost://chat.example/{TOKEN}"})
    assert "apprise ntfy://ntfy.example/papers" in out and TOKEN not in out
    code, out = cli("list", env={})  # the variable is not set where `list` runs
    assert "lab apprise ntfy://ntfy.example/papers + apprise $LAB_CHATS" in out

    code, out = cli("subscribe", "lab", "--apprise-env", "NOT_HERE")
    assert code == 0 and "note: NOT_HERE is not set here" in out
    code, out = cli("subscribe", "lab", "--apprise-env", "none")
    assert code == 0 and "$" not in out.splitlines()[0]

    code, out = cli("unsubscribe", "lab", "--apprise", "ntfy://ntfy.example/elsewhere")
    assert code == 1 and "has no such Apprise destination" in out
    code, out = cli("unsubscribe", "lab", "--apprise", "ntfy://ntfy.example/papers")
    assert code == 0 and "removed an Apprise destination of lab" in out
    with Store.open(database_url) as store:
        (lab,) = store.subscribers.all()
        assert lab.apprise == () and lab.apprise_env is None


@pytest.mark.database
def test_resume_also_resumes_paused_destinations(config_file: Path, database_url: str) -> None:
    from datetime import UTC, datetime

    from bot.channels.apprise_urls import destination

    code, out = outcome(
        "subscribe", "lab", "--apprise", "ntfy://ntfy.example/papers", "robot", config=config_file
    )
    assert code == 0, out
    channel = destination("ntfy://ntfy.example/papers").channel
    with Store.open(database_url) as store:
        (lab,) = store.subscribers.all()
        assert lab.id is not None
        store.targets.pause(lab.id, channel, "3 digests in a row refused", now=datetime.now(UTC))
    code, out = outcome("status", config=config_file)
    assert "lab apprise ntfy://ntfy.example/papers: paused: 3 digests in a row refused" in out
    code, out = outcome("resume", "lab", config=config_file)
    assert code == 0 and "(and to 1 paused destination)" in out
    with Store.open(database_url) as store:
        assert store.targets.paused() == {}
