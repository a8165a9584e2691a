"""Loading the config: a TOML file (or a mapping) in, one validated `Config` out, every
problem reported at once as a ConfigError; and the commented example config shipped with
the package.

Whatever the file holds (too large, not UTF-8, a folder, TOML nested too deep), the outcome
is a Config or a ConfigError. Must not open the database, the network or SMTP: it only
checks and describes.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bot.config.environment import (
    SecretReader,
    read_imap_password,
    read_password,
    read_secrets,
    read_server_passwords,
    read_slack_secrets,
    read_web_secret,
    read_webhook_secrets,
    strip_written_secrets,
)
from bot.config.problems import validation_problems
from bot.config.schema import Config, cross_section_problems, duplicate_name_problems
from bot.config.sections import web_link_problems
from bot.core.errors import ConfigError

MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a config file larger than this is a mistake

# A check of the raw data given from above (each channel kind's: `bot.pipeline.wiring`): the
# data and the environment the secrets are read from in, its problems out.
RawCheck = Callable[[Mapping[str, Any], Mapping[str, str]], list[str]]


def parse_config(
    data: Mapping[str, Any],
    *,
    source: str = "config",
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    checks: Sequence[RawCheck] = (),
) -> Config:
    """Validate a config mapping; raise ConfigError listing every problem at once. A secret
    whose variable is not set is no problem here: the Config records it (`missing_secrets`)
    and the command that uses it asks for it. `checks` read the raw data too (the channel
    kinds': where each subscriber's digests go), their problems reported with the rest."""
    raw, problems = strip_written_secrets(data)
    # These checks and secrets read the raw data, so their problems are reported even when
    # the schema fails too: every problem at once.
    problems += duplicate_name_problems(raw) + web_link_problems(raw.get("web"))
    secrets = SecretReader(environ)
    for check in checks:
        problems += check(raw, secrets.env)
    password = read_password(raw.get("email"), secrets)
    server_passwords = read_server_passwords(raw.get("email"), secrets)
    imap_password = read_imap_password(raw.get("bounces"), secrets)
    webhook_secrets = read_webhook_secrets(raw.get("bounces"), secrets)
    slack_secrets = read_slack_secrets(raw.get("slack"), secrets)
    web_key = read_web_secret(raw.get("web"), secrets)
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(
            validation_problems(exc, model=Config, data=raw) + problems + secrets.problems,
            source=source,
        ) from None
    problems += cross_section_problems(config)
    webhooks = read_secrets(config, secrets)
    problems += secrets.problems
    if problems:
        raise ConfigError(problems, source=source)
    config.path = path
    config.environ = secrets.env
    config.webhooks = webhooks
    config.missing_secrets = secrets.missing
    if config.email is not None:
        config.email.password = password
        for server, server_password in zip(config.email.servers, server_passwords, strict=False):
            server.password = server_password
    if config.bounces is not None:
        config.bounces.password = imap_password
        for field, value in webhook_secrets.items():
            setattr(config.bounces, field, value)
    if config.slack is not None:
        for field, value in slack_secrets.items():
            setattr(config.slack, field, value)
    config.web.secret_key = web_key
    return config


def load_config(
    path: str | Path,
    *,
    environ: Mapping[str, str] | None = None,
    checks: Sequence[RawCheck] = (),
) -> Config:
    """Read and validate a TOML config file: whatever the file holds (too large, not UTF-8,
    a folder, TOML nested too deep), the outcome is a Config or a ConfigError (`checks`:
    as `parse_config` takes them)."""
    file = Path(path)
    data = read_config_data(file)
    return parse_config(data, source=str(file), path=file.resolve(), environ=environ, checks=checks)


def read_config_data(file: Path) -> dict[str, Any]:
    """A config file's TOML as data, not yet validated. Raises ConfigError: no such file,
    unreadable, too large, not UTF-8, not TOML."""
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(
            [f"no such file: {file}"], source=str(file), hint="create one with `paperbell init`"
        ) from None
    except OSError as exc:
        raise ConfigError(
            [f"cannot read the file: {exc.strerror or exc}"], source=str(file)
        ) from None
    if len(raw) > MAX_CONFIG_BYTES:
        limit = MAX_CONFIG_BYTES // (1024 * 1024)
        raise ConfigError([f"the file is larger than {limit} MB: not a config"], source=str(file))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [f"not UTF-8 text (byte {exc.start + 1}): save the file as UTF-8"], source=str(file)
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"not valid TOML: {exc}"], source=str(file)) from None
    except RecursionError:
        raise ConfigError(
            ["not valid TOML: arrays or tables nested too deep"], source=str(file)
        ) from None
    except ValueError:  # a number too long for Python (over 4,300 digits)
        raise ConfigError(
            ["not valid TOML: a number with too many digits"], source=str(file)
        ) from None
    return data


def example_config_text() -> str:
    """The commented example config shipped with the package (same text as config.example.toml)."""
    from importlib.resources import files

    packaged = files("bot") / "config.example.toml"
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    # A source checkout: the file at the top of the repository (bot/config/load.py, up 3).
    return (Path(__file__).resolve().parents[2] / "config.example.toml").read_text("utf-8")
