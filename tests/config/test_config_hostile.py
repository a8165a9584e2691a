"""Hostile config files: whatever the file holds, `load_config` returns a Config or raises a
ConfigError that names the key (never another exception), and the command exits 2.

Issue 17, fault 8: a NUL in a rule, a 300-character time zone, `retry_first_seconds = inf`
(which passed check-config, then crashed `digest` with OverflowError), TOML nested deep
enough for RecursionError, and files that are huge, not UTF-8, or a folder."""

from __future__ import annotations

import json
import math
import tempfile
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.cli import run
from support.hostile import LANGUAGE_TEXTS, expected_language

from bot.config import (
    MAX_CONFIG_BYTES,
    Config,
    DaemonConfig,
    DeliveryConfig,
    DigestConfig,
    EmailConfig,
    EmailServerConfig,
    PollingConfig,
    SlackConfig,
    SubscriberConfig,
    WebConfig,
    load_config,
    parse_config,
)
from bot.core.errors import ConfigError
from bot.pipeline import retry_policy

BASE = """version = 1

[email]
from = "paperbell <papers@example.org>"

[[sources]]
kind = "arxiv"
categories = ["cs.LG"]

[[subscribers]]
name = "ada"
email = "ada@example.org"
rules = ["robot"]
"""


def minimal(**sections: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "version": 1,
        "email": {"from": "paperbell <papers@example.org>"},
        "subscribers": [{"name": "ada", "email": "ada@example.org", "rules": ["robot"]}],
    }
    for name, values in sections.items():
        if name == "subscriber":
            data["subscribers"][0].update(values)
        elif name == "server":
            data["email"] = {**data["email"], "servers": [{"host": "smtp.example", **values}]}
        else:
            data[name] = {**data.get(name, {}), **values}
    return data


def problems_of(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, environ={})
    return info.value.problems


# -- every number is finite and bounded ---------------------------------------------------------

SECTIONS = {
    "digest": DigestConfig,
    "delivery": DeliveryConfig,
    "polling": PollingConfig,
    "daemon": DaemonConfig,
    "web": WebConfig,
    "email": EmailConfig,
    "slack": SlackConfig,
    "subscriber": SubscriberConfig,
    "server": EmailServerConfig,
}
WHERE = {"subscriber": "subscribers[0].", "server": "email.servers[0]."}
NUMBERS = [
    (section, key)
    for section, model in SECTIONS.items()
    for key, info in model.model_fields.items()
    if info.annotation in (int, float, int | None, float | None)
]


def test_the_sections_have_numbers_to_check() -> None:
    assert ("delivery", "retry_first_seconds") in NUMBERS
    assert ("digest", "max_rules") in NUMBERS and ("subscriber", "max_papers") in NUMBERS
    assert len(NUMBERS) >= 20


@pytest.mark.parametrize(("section", "key"), NUMBERS, ids=[f"{s}.{k}" for s, k in NUMBERS])
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1e308, -1e308, 10**30])
def test_every_number_in_the_config_is_finite_and_bounded(
    section: str, key: str, value: float
) -> None:
    where = WHERE.get(section, f"{section}.")
    found = problems_of(minimal(**{section: {key: value}}))
    assert any(p.startswith(where + key + ":") for p in found), found


def test_retry_first_seconds_inf_fails_check_config_with_its_key_path(tmp_path: Path) -> None:
    # Before: check-config said OK, then `digest` crashed with OverflowError.
    for value in ("inf", "nan", "1e308"):
        config = tmp_path / "config.toml"
        config.write_text(BASE + f"\n[delivery]\nretry_first_seconds = {value}\n")
        checked = run("check-config", "-c", str(config), cwd=tmp_path)
        assert checked.returncode == 2, checked.stderr
        assert "delivery.retry_first_seconds" in checked.stderr
        assert "Traceback" not in checked.stderr


def test_the_largest_retry_settings_give_every_attempt_a_delay() -> None:
    # Before: max_attempts = 100 was accepted, and the 42nd failure's delay (60 s * 2**41)
    # overflowed timedelta: OverflowError in the outbox.
    biggest = {"max_attempts": 30, "retry_first_seconds": 86400, "retry_max_seconds": 30 * 86400}
    policy = retry_policy(parse_config(minimal(delivery=biggest), environ={}))
    assert all(policy.delay(n) <= policy.max_delay for n in range(1, 31))
    for key, value in (("max_attempts", 31), ("retry_first_seconds", 86401)):
        assert any(
            p.startswith(f"delivery.{key}") for p in problems_of(minimal(delivery={key: value}))
        )


def test_source_options_are_finite_too() -> None:
    data = minimal()
    for source in (
        {"kind": "feed", "url": "https://journal.example/rss", "interval_minutes": math.inf},
        {"kind": "arxiv", "categories": ["cs.LG"], "max_body_mb": math.nan},
    ):
        data["sources"] = [source]
        found = problems_of(data)
        key = next(k for k, v in source.items() if isinstance(v, float))
        assert any(p.startswith(f"sources[0].{key}") and "finite" in p for p in found), found


# -- rules and time zones -----------------------------------------------------------------------


def test_a_nul_or_control_character_in_a_rule_is_refused_at_its_key_path(tmp_path: Path) -> None:
    found = problems_of(minimal(subscriber={"rules": ["robot", "diffusion\x00policy"]}))
    assert found[0].startswith("subscribers[0].rules[1]: a rule cannot hold the control")
    assert "U+0000 at column 10" in found[0]
    config = tmp_path / "config.toml"
    config.write_text(BASE.replace('rules = ["robot"]', 'rules = ["robot\\u001b[31m"]'))
    checked = run("check-config", "-c", str(config), cwd=tmp_path)
    assert checked.returncode == 2 and "Traceback" not in checked.stderr
    assert "subscribers[0].rules[0]: a rule cannot hold the control character U+001B" in (
        checked.stderr
    )


@pytest.mark.parametrize(
    "zone", ["A" * 300, "America", "../../etc/passwd", "/etc/localtime", "Europe/\x00Berlin"]
)
def test_an_absurd_time_zone_is_an_unknown_one_at_its_key_path(zone: str) -> None:
    for section in ("digest", "subscriber"):
        found = problems_of(minimal(**{section: {"timezone": zone}}))
        where = "subscribers[0]" if section == "subscriber" else "digest"
        assert any(p.startswith(f"{where}.timezone: unknown time zone") for p in found), found
        assert all(len(p) < 200 for p in found)


def test_a_300_character_time_zone_exits_2_from_the_command(tmp_path: Path) -> None:
    # Before: "cannot write .../zoneinfo/AAA...: File name too long", exit 1.
    config = tmp_path / "config.toml"
    config.write_text(BASE + f'\n[digest]\ntimezone = "{"A" * 300}"\n')
    checked = run("check-config", "-c", str(config), cwd=tmp_path)
    assert checked.returncode == 2 and "Traceback" not in checked.stderr
    assert "digest.timezone: unknown time zone" in checked.stderr
    assert "cannot write" not in checked.stderr


def test_max_rules_caps_a_subscribers_rules() -> None:
    rules = [f"topic{n}" for n in range(51)]
    found = problems_of(minimal(subscriber={"rules": rules}))
    assert found == [
        "subscribers[0].rules: 51 rules, more than the 50 a subscriber may have ([digest] "
        "max_rules): remove some, or join them with OR"
    ]
    config = parse_config(minimal(subscriber={"rules": rules}, digest={"max_rules": 60}))
    assert len(config.subscribers[0].rules) == 51
    assert any(
        p.startswith("digest.max_rules") for p in problems_of(minimal(digest={"max_rules": 0}))
    )


@settings(max_examples=150)
@given(LANGUAGE_TEXTS)
@example("zh\x00")
@example("x" * 5000)
@example("en-GB")
@example("\x7f" * 50)  # each escaped in the message: it was 224 characters long
@example("\U000e0001" * 50)
def test_any_language_gives_its_standard_tag_or_a_problem_at_its_key(language: str) -> None:
    data = minimal(subscriber={"language": language})
    tag, refusal = expected_language(language)
    if language.strip().lower() in ("none", "off"):  # words for the command line, not tags
        tag, refusal = None, f"language {language.strip()!r}: no language paperbell knows"
    if refusal is None:
        config = parse_config(data, environ={})
        assert config.declared_subscribers()[0].language == tag
        return
    found = problems_of(data)
    assert len(found) == 1 and found[0].startswith("subscribers[0].language: language "), found
    assert found[0].startswith(f"subscribers[0].language: {refusal[:40]}")
    assert "\x00" not in found[0] and len(found[0]) < 200


# -- files that are not config files ------------------------------------------------------------


def _refused(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    return str(info.value)


def test_deep_huge_binary_and_folder_files_are_config_errors(tmp_path: Path) -> None:
    deep = tmp_path / "deep.toml"
    deep.write_text(BASE + "x = " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested too deep" in _refused(deep)
    inline = tmp_path / "inline.toml"
    inline.write_text(BASE + "y = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n")
    assert "nested too deep" in _refused(inline)
    digits = tmp_path / "digits.toml"
    digits.write_text(BASE + "\n[digest]\nwindow_days = " + "9" * 5000 + "\n")
    assert "too many digits" in _refused(digits)
    huge = tmp_path / "huge.toml"
    huge.write_text(BASE + ("# padding\n" * (MAX_CONFIG_BYTES // 10 + 1)))
    assert "larger than 4 MB" in _refused(huge)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(BASE.encode() + b"\n# \xff\xfe caf\xe9\n")
    assert "not UTF-8" in _refused(binary)
    assert "cannot read the file" in _refused(tmp_path)
    checked = run("check-config", "-c", str(deep), cwd=tmp_path)
    assert checked.returncode == 2 and "Traceback" not in checked.stderr


# -- the property: a Config or a ConfigError, never anything else -------------------------------

_KEYS = sorted(
    {key for model in SECTIONS.values() for key in model.model_fields}
    | {"kind", "name", "rules", "categories", "url", "x", "", "from", "a.b"}
)
_ODD_TEXT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"]) | st.sampled_from("\x00\x1b\u202e\ufeff"),
    max_size=40,
)
_HOSTILE = st.one_of(
    st.sampled_from(
        [
            math.inf,
            -math.inf,
            math.nan,
            1e308,
            -1e308,
            -1,
            0,
            2**63 - 1,
            -(2**63),
            "A" * 300,
            "../../etc/passwd",
            "America",
            "robot\x00",
            "UTC",
            "Europe/Berlin",
            "08:00",
            "weekly",
            "monday",
            "arxiv",
            "ada@example.org",
            "cs.RO",
            '"diffusion policy" cat:cs.RO',
            "x" * 600,
        ]
    ),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.booleans(),
    st.dates(min_value=date(1, 1, 1)),
    _ODD_TEXT,
)
_VALUES = st.recursive(
    _HOSTILE,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)


def _toml_key(key: str) -> str:
    return json.dumps(key)  # a quoted key: any text


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str):
        return json.dumps(value)  # JSON's string escapes are TOML's (\uXXXX, \", \\)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


@st.composite
def config_texts(draw: st.DrawFn) -> str:
    """TOML from the base config, with hostile values put in known and unknown places,
    sometimes nested deep or cut short."""
    lines = [BASE]
    for _ in range(draw(st.integers(0, 4))):
        section = draw(st.sampled_from([*SECTIONS, "sources", "database", "bogus"]))
        table = {
            draw(st.sampled_from(_KEYS)): draw(_VALUES) for _ in range(draw(st.integers(1, 3)))
        }
        if section == "subscriber":
            entry = {"name": "bob", "email": "bob@example.org", "rules": ["x"], **table}
            lines.append(
                "[[subscribers]]\n"
                + "\n".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in entry.items())
            )
        elif section == "server":
            entry = {"host": draw(st.sampled_from(["smtp.example", "a b", "x" * 300])), **table}
            lines.append(
                "[[email.servers]]\n"
                + "\n".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in entry.items())
            )
        elif section == "sources":
            entry = {
                "kind": draw(st.sampled_from(["arxiv", "huggingface", "feed", "nope"])),
                **table,
            }
            lines.append(
                "[[sources]]\n"
                + "\n".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in entry.items())
            )
        else:
            lines.append(
                f"[{section}]\n"
                + "\n".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items())
            )
    text = "\n\n".join(lines) + "\n"
    depth = draw(st.sampled_from([0, 0, 0, 50, 3000]))
    if depth:
        text += f"deep = {'[' * depth}1{']' * depth}\n"
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(_ODD_TEXT) + text[cut:]
    return text


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(config_texts())
@example(BASE + "\n[delivery]\nretry_first_seconds = inf\n")
@example(BASE + '\n[digest]\ntimezone = "' + "A" * 300 + '"\n')
@example(BASE.replace('"robot"', '"robot\\u0000"'))
@example(BASE + "x = " + "[" * 3000 + "]" * 3000 + "\n")
@example(BASE + "\n[digest]\nwindow_days = " + "9" * 5000 + "\n")
@example(BASE + '\n[[email.servers]]\nhost = "a\\u0000"\nweight = inf\n')
@example(BASE.replace("[email]", '[email]\nhost = "x"') + '\n[[email.servers]]\nhost = "a"\n')
def test_any_config_text_gives_a_config_or_a_config_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.toml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            config = load_config(path, environ={})
        except ConfigError as exc:
            assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)
            return
    assert isinstance(config, Config)
    for sub in config.declared_subscribers():  # what the pipeline then reads
        assert sub.schedule.zone is not None


@settings(max_examples=150)
@given(st.dictionaries(st.sampled_from([*SECTIONS, "subscribers", "sources", "version"]), _VALUES))
def test_any_parsed_mapping_gives_a_config_or_a_config_error(data: dict[str, Any]) -> None:
    try:
        config = parse_config({"version": 1, **data}, environ={})
    except ConfigError as exc:
        assert exc.problems
    else:
        assert isinstance(config, Config)


_SERVER_KEYS = sorted({*EmailServerConfig.model_fields, "x", ""})


@settings(max_examples=150)
@given(
    st.one_of(
        _VALUES,
        st.lists(
            st.dictionaries(st.sampled_from(_SERVER_KEYS), _VALUES, max_size=6)
            | st.builds(
                lambda d: {"host": "smtp.example", **d},
                st.dictionaries(st.sampled_from(_SERVER_KEYS), _VALUES, max_size=4),
            ),
            max_size=4,
        ),
    ),
    st.dictionaries(st.sampled_from(sorted(EmailConfig.model_fields)), _VALUES, max_size=3),
)
@example([{"host": "smtp.example", "password": "x", "password_env": "PB"}], {})
@example([{"host": "a"}, {"host": "A", "port": 587}], {"host": "b"})
def test_any_email_servers_give_a_config_or_errors_naming_their_key(
    servers: Any, email: dict[str, Any]
) -> None:
    """[[email.servers]] of any shape beside any [email] keys: a Config whose relays the
    sender can use, or problems each naming a key under email."""
    section = {**email, "from": "paperbell <papers@example.org>", "servers": servers}
    try:
        config = parse_config(minimal(email=section), environ={"PB": "s3cret-Value"})
    except ConfigError as exc:
        assert exc.problems and all(p.startswith(("email", "subscribers")) for p in exc.problems)
        return
    assert config.email is not None
    for server in config.email.servers:
        assert server.weight >= 1 and 1 <= server.effective_port <= 65535 and ":" in server.relay
