"""The systemd unit: deploy/paperbell.service (shipped in the package) and the one
`paperbell init --systemd` writes carry [Install], User=, EnvironmentFile= (no secret in the
unit), Restart=on-failure and the hardening (ProtectSystem=strict, NoNewPrivileges=yes, ...),
and pass `systemd-analyze verify` where systemd's tools are installed. The environment file
it writes names the config's secrets, without their values, and is never overwritten. A
unit on a config, database, like_file, model folder or paperbell the service could not see
(in /tmp, /var/tmp) is refused; one in a home folder makes the homes read-only, not hidden.
The service may write fastembed's model folder, the default one or the config's."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from support.cli import invoke, run
from support.config import local_feed_config
from support.paths import ROOT

from bot.cli.service import (
    ENV_FILE_NAME,
    MIN_STOP_SECONDS,
    PRIVATE_TMP,
    STOP_MARGIN_SECONDS,
    UNIT_NAME,
    Service,
    paperbell_executable,
    quote,
    render_unit,
    unit_template,
)
from bot.cli.setup import next_steps
from bot.config import Config, parse_config
from bot.core.errors import ConfigError
from bot.pipeline.model_cache import fastembed_cache_dir

UNIT = ROOT / "deploy" / UNIT_NAME
ARTIFACTS = ROOT / "test-artifacts"

pytestmark = pytest.mark.skipif(not UNIT.exists(), reason="run from a source checkout")


def unit_entries(text: str) -> dict[str, list[tuple[str, str]]]:
    """A unit file's sections, each a list of (key, value) (a key may come twice)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in text.splitlines():
        if not line.strip() or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), [])
            continue
        assert current is not None, line
        key, _, value = line.partition("=")
        current.append((key, value))
    return sections


def values(sections: dict[str, list[tuple[str, str]]], section: str, key: str) -> list[str]:
    return [v for k, v in sections.get(section, []) if k == key]


def check_unit(text: str) -> dict[str, list[tuple[str, str]]]:
    """The unit's promises: installed with the machine, as a user, secrets from a file and
    none in it, restarted on failure, hardened; returns its sections."""
    sections = unit_entries(text)
    assert values(sections, "Install", "WantedBy") == ["multi-user.target"]
    service = dict(sections["Service"])
    assert service["User"] and service["User"] != "root"
    assert service["EnvironmentFile"].endswith(f"/{ENV_FILE_NAME}")
    assert service["Restart"] == "on-failure"
    for key, value in {
        "ProtectSystem": "strict",
        "NoNewPrivileges": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "CapabilityBoundingSet": "",
    }.items():
        assert service[key] == value, key
    assert service["ProtectHome"] in ("yes", "read-only")
    assert "Environment" not in service  # secrets never in the unit itself
    assert not re.search(r"(?i)(password|token|secret)\s*=", text.replace("_env", ""))
    command = shlex.split(service["ExecStart"])
    assert command[0].startswith("/") and command[1:3] == ["run", "-c"]
    assert Path(command[3]).is_absolute()
    return sections


def test_the_repository_unit_keeps_its_promises() -> None:
    sections = check_unit(UNIT.read_text())
    assert values(sections, "Service", "ReadWritePaths") == ["/var/lib/paperbell"]


def test_the_unit_ships_in_the_package() -> None:
    # In CI `bot` is the installed wheel: the copy `init --systemd` reads is this file.
    assert unit_template() == UNIT.read_text()


def verify(unit: Path) -> None:
    """`systemd-analyze verify` on the unit, where systemd's tools are installed."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return
    checked = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr


def skip_in_a_temporary_folder() -> None:
    """Skip a test that makes a unit for this checkout's paperbell when the checkout (its
    venv too) is in /tmp or /var/tmp: init refuses it, as the unit would hide it."""
    if any(ROOT.resolve().is_relative_to(folder) for folder in PRIVATE_TMP):
        pytest.skip("the checkout is in a temporary folder, which the unit hides")


@pytest.fixture
def service_folder() -> Iterator[Path]:
    """A fresh folder for a service's config, outside /tmp and /var/tmp, which the unit
    hides from the service (init refuses a config there): in the checkout's test-artifacts/,
    which git ignores; removed after the test."""
    skip_in_a_temporary_folder()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="systemd-", dir=ARTIFACTS))
    yield folder
    shutil.rmtree(folder)


def secrets_config(folder: Path, database: str = "sqlite:///data/paperbell.sqlite") -> Path:
    config = folder / "config.toml"
    config.write_text(
        local_feed_config(database)
        + """[email]
from = "papers@example.org"
host = "smtp.example.org"
username = "papers"
password_env = "PAPERBELL_SMTP_PASSWORD"
[web]
public_url = "https://papers.example.org"
secret_key_env = "PAPERBELL_SECRET_KEY"
[slack]
bot_token_env = "SLACK_BOT_TOKEN"
signing_secret_env = "SLACK_SIGNING_SECRET"
[[subscribers]]
name = "lab"
slack_channel = "#lab"
webhook_url_env = "LAB_WEBHOOK"
rules = ["robot"]
"""
    )
    return config


def test_init_systemd_writes_the_unit_and_the_secrets_names_without_the_secrets(
    tmp_path: Path, service_folder: Path
) -> None:
    folder = service_folder / "my papers 100%"  # a space and a specifier: quoted and escaped
    folder.mkdir()
    config = secrets_config(folder)
    made = run("init", "--systemd", "-c", str(config), "--user", "paperbell", cwd=tmp_path)
    assert made.returncode == 0, made.stderr  # no secret in the environment, none asked
    unit, env_file = tmp_path / UNIT_NAME, folder / ENV_FILE_NAME
    sections = check_unit(unit.read_text())
    service = dict(sections["Service"])
    assert service["User"] == "paperbell"
    command = shlex.split(service["ExecStart"].replace("%%", "%"))
    assert Path(command[0]).is_file() and command[3] == str(config)
    assert service["EnvironmentFile"].replace("%%", "%") == str(env_file)
    assert shlex.split(service["ReadWritePaths"].replace("%%", "%")) == [str(folder / "data")]
    assert service["TimeoutStopSec"] == "90"
    verify(unit)

    assert env_file.stat().st_mode & 0o777 == 0o600
    names = re.findall(r"^([A-Z_]+)=(.*)$", env_file.read_text(), re.M)
    assert names == [
        ("PAPERBELL_SECRET_KEY", ""),
        ("PAPERBELL_SMTP_PASSWORD", ""),
        ("SLACK_BOT_TOKEN", ""),
        ("SLACK_SIGNING_SECRET", ""),
        ("LAB_WEBHOOK", ""),
    ]
    assert "# email.password_env\nPAPERBELL_SMTP_PASSWORD=\n" in env_file.read_text()
    assert made.stdout.splitlines()[:2] == [
        f"wrote {env_file}: fill in PAPERBELL_SECRET_KEY, PAPERBELL_SMTP_PASSWORD, "
        "SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, LAB_WEBHOOK",
        f"wrote {UNIT_NAME}: {' '.join(command)}, as paperbell",
    ]
    quoted = shlex.quote(str(folder / "data"))
    assert f"  sudo install -d -o paperbell -m 700 {quoted}" in made.stdout
    assert "  sudo systemctl daemon-reload && sudo systemctl enable --now paperbell" in (
        made.stdout
    )

    # Again: the unit is kept unless --force; the environment file always (secrets in it).
    env_file.write_text("PAPERBELL_SMTP_PASSWORD=filled-in\n")
    again = run("init", "--systemd", "-c", str(config), "--user", "paperbell", cwd=tmp_path)
    assert again.returncode == 2
    assert again.stderr == f"error: {UNIT_NAME} exists; use --force to overwrite it\n"
    forced = run(
        "init", "--systemd", "-c", str(config), "--user", "paperbell", "--force", cwd=tmp_path
    )
    assert forced.returncode == 0, forced.stderr
    assert env_file.read_text() == "PAPERBELL_SMTP_PASSWORD=filled-in\n"
    assert f"kept {env_file} (it exists)" in forced.stdout


def test_init_systemd_to_stdout_for_postgresql(tmp_path: Path, service_folder: Path) -> None:
    config = secrets_config(service_folder, database="postgresql://paperbell@db.example.org/papers")
    written = invoke("init", "--systemd", "-c", str(config), "--user", "paperbell", "-")
    assert written.exit_code == 0, written.output
    unit = written.stdout
    sections = check_unit(unit)
    assert values(sections, "Service", "ReadWritePaths") == []  # it writes no file
    assert "wrote" not in unit and "next:" in written.stderr
    assert "# PGPASSWORD=" in (service_folder / ENV_FILE_NAME).read_text()
    assert not (tmp_path / UNIT_NAME).exists()
    file = tmp_path / "unit" / UNIT_NAME
    file.parent.mkdir()
    file.write_text(unit)
    verify(file)


def test_init_systemd_refuses_root_and_a_missing_config(tmp_path: Path) -> None:
    config = secrets_config(tmp_path)
    as_root = invoke("init", "--systemd", "-c", str(config), "--user", "root", "-")
    assert as_root.exit_code == 2
    assert "a service should not run as root: name its account with --user" in as_root.output
    missing = invoke("init", "--systemd", "-c", str(tmp_path / "nope.toml"), "--user", "pb")
    assert missing.exit_code == 2 and "no such file" in missing.output


def test_a_paperbell_in_a_home_gets_read_only_homes(tmp_path: Path) -> None:
    service = Service(
        command=("/home/ada/.venv/bin/paperbell", "run", "-c", "/etc/paperbell/config.toml"),
        user="ada",
        env_file=Path("/etc/paperbell/paperbell.env"),
        data_dir=Path("/var/lib/paperbell"),
        stop_seconds=150,
    )
    sections = unit_entries(render_unit(unit_template(), service))
    assert values(sections, "Service", "ProtectHome") == ["read-only"]
    assert values(sections, "Service", "TimeoutStopSec") == ["150"]
    elsewhere = replace(service, command=("/opt/pb/bin/paperbell",))
    assert "ProtectHome=yes" in render_unit(unit_template(), elsewhere)


def test_a_venv_outside_the_homes_on_a_python_in_one_gets_read_only_homes(
    tmp_path: Path,
) -> None:
    # `uv venv /opt/pb` or pyenv: the venv's python is a link into the Python's home folder
    # (pyvenv.cfg names it), which ProtectHome=yes hides: the unit would fail with 203/EXEC.
    python_home = "/home/ada/.local/share/uv/python/cpython-3.11-linux/bin"
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(f"{python_home}/python3.11")
    (venv / "pyvenv.cfg").write_text(f"home = {python_home}\nversion = 3.11.9\n")
    script = venv / "bin" / "paperbell"
    script.write_text(f"#!{venv}/bin/python\nfrom bot.cli import main\nmain()\n")
    service = Service(
        command=(str(script), "run", "-c", "/etc/paperbell/config.toml"),
        user="ada",
        env_file=Path("/etc/paperbell/paperbell.env"),
        data_dir=Path("/var/lib/paperbell"),
        stop_seconds=90,
    )
    assert "ProtectHome=read-only" in render_unit(unit_template(), service)


def test_a_database_beside_the_config_is_pointed_out(tmp_path: Path, service_folder: Path) -> None:
    config = secrets_config(service_folder, database="sqlite:///paperbell.sqlite")
    unit_file = tmp_path / UNIT_NAME
    written = invoke("init", "--systemd", "-c", str(config), "--user", "paperbell", str(unit_file))
    assert written.exit_code == 0, written.output
    assert "note: the database is in the config's folder, so the service may write there" in (
        written.output
    )
    unit = unit_entries(unit_file.read_text())
    assert values(unit, "Service", "ReadWritePaths") == [str(service_folder)]


@given(st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs"]), min_size=1))
@example('/srv/my papers/100%/$HOME/\\"quoted"/a\'b;c')
def test_a_word_of_the_command_line_reads_back_as_it_was(word: str) -> None:
    # systemd unquotes "..." (\\ and \" escaped) as the shell does; %% and $$ are its own.
    quoted = quote(word, command=True)
    assert "\n" not in quoted
    back = shlex.split(quoted.replace("%%", "\0").replace("$$", "$"))
    assert back == [word.replace("%", "\0")]


def test_a_control_character_in_a_path_or_the_user_is_refused(tmp_path: Path) -> None:
    config = secrets_config(tmp_path)
    refused = invoke("init", "--systemd", "-c", str(config), "--user", "pb\nExecStartPre=/x", "-")
    assert refused.exit_code == 2 and "--user holds a control character" in refused.output


@pytest.mark.parametrize("temporary", ["/tmp", "/var/tmp"])
def test_init_systemd_refuses_a_config_the_service_could_not_see(temporary: str) -> None:
    # PrivateTmp=yes gives the service a /tmp and a /var/tmp of its own, empty: a unit on a
    # config there fails at start (and both folders are emptied at boot anyway).
    with tempfile.TemporaryDirectory(dir=temporary) as folder:
        config = secrets_config(Path(folder))
        refused = invoke("init", "--systemd", "-c", str(config), "--user", "paperbell", "-")
        assert refused.exit_code == 2, refused.output
        assert f"the config file {config} is in {temporary}" in refused.stderr
        assert "PrivateTmp=yes" in refused.stderr and "/etc/paperbell/" in refused.stderr
        assert refused.stdout == ""  # no unit
        assert not (Path(folder) / ENV_FILE_NAME).exists()


def test_a_database_or_a_paperbell_in_a_temporary_folder_is_refused() -> None:
    config = parse_config(
        {"version": 1, "database": {"url": "sqlite:////var/tmp/pb/paperbell.sqlite"}},
        path=Path("/etc/paperbell/config.toml"),
    )
    with pytest.raises(ConfigError) as refused:
        Service.of(config, user="paperbell", executable=("/tmp/venv/bin/paperbell",))
    assert refused.value.problems == [
        "the paperbell command /tmp/venv/bin/paperbell is in /tmp, which the service cannot "
        "see: its unit gives it an empty /tmp of its own (PrivateTmp=yes)",
        "the database's folder /var/tmp/pb is in /var/tmp, which the service cannot see: its "
        "unit gives it an empty /var/tmp of its own (PrivateTmp=yes)",
    ]


def with_like_file(like_file: str) -> Config:
    """A config in /etc/paperbell whose one subscriber likes the papers of `like_file`."""
    return parse_config(
        {
            "version": 1,
            "database": {"url": "sqlite:////var/lib/paperbell/paperbell.sqlite"},
            "subscribers": [
                {"name": "ada", "email": "ada@example.org", "rules": ["robot"]},
                {
                    "name": "lin",
                    "email": "lin@example.org",
                    "rules": ["robot"],
                    "like_file": like_file,
                },
            ],
        },
        path=Path("/etc/paperbell/config.toml"),
    )


def test_a_like_file_in_a_home_gets_read_only_homes() -> None:
    # A library export kept up to date in its owner's home (Zotero's auto-export): the
    # service reads it again when it changes, so ProtectHome=yes must not hide it.
    config = with_like_file("/home/ada/Zotero/library.bib")
    service = Service.of(config, user="ada", executable=("/opt/pb/bin/paperbell",))
    assert "ProtectHome=read-only" in render_unit(unit_template(), service)


def test_a_like_file_in_a_temporary_folder_is_refused() -> None:
    config = with_like_file("/tmp/library.bib")
    with pytest.raises(ConfigError) as refused:
        Service.of(config, user="ada", executable=("/opt/pb/bin/paperbell",))
    assert refused.value.problems == [
        "subscriber lin's like_file /tmp/library.bib is in /tmp, which the service cannot "
        "see: its unit gives it an empty /tmp of its own (PrivateTmp=yes)"
    ]


@pytest.mark.parametrize("grace", [0, 20, 59.5, 600])
def test_the_stop_timeout_outlasts_the_grace_by_the_margin(grace: float) -> None:
    """A stop ends within the grace and a second or so: systemd waits the grace and the
    margin (its own default at least) before it kills the daemon."""
    config = parse_config(
        {
            "version": 1,
            "database": {"url": "sqlite:////var/lib/paperbell/paperbell.sqlite"},
            "daemon": {"shutdown_grace_seconds": grace},
        },
        path=Path("/etc/paperbell/config.toml"),
    )
    service = Service.of(config, user="ada", executable=("/opt/pb/bin/paperbell",))
    assert service.stop_seconds >= grace + STOP_MARGIN_SECONDS
    assert service.stop_seconds >= MIN_STOP_SECONDS
    sections = unit_entries(render_unit(unit_template(), service))
    assert values(sections, "Service", "TimeoutStopSec") == [str(service.stop_seconds)]


def with_fastembed(database: str, cache_dir: str | None = None) -> Config:
    """A config in /etc/paperbell that ranks papers with fastembed's local model."""
    embeddings = {"provider": "fastembed", "model": "BAAI/bge-small-en-v1.5"}
    return parse_config(
        {
            "version": 1,
            "database": {"url": database},
            "embeddings": embeddings | ({"cache_dir": cache_dir} if cache_dir else {}),
        },
        path=Path("/etc/paperbell/config.toml"),
        environ={"HOME": "/home/paperbell", "CACHE_DIRECTORY": "/var/cache/paperbell"},
    )


def test_the_unit_gives_fastembed_a_lasting_model_folder(tmp_path: Path) -> None:
    # With PostgreSQL and no cache_dir, the model goes to the service's cache folder: one
    # that systemd makes for it and keeps across starts, writable under ProtectSystem=strict.
    skip_in_a_temporary_folder()
    config = with_fastembed("postgresql://paperbell@db.example.org/papers")
    service = Service.of(config, user="paperbell", executable=paperbell_executable())
    unit = render_unit(unit_template(), service)
    assert values(unit_entries(unit), "Service", "CacheDirectory") == ["paperbell"]
    assert values(unit_entries(unit), "Service", "ReadWritePaths") == []
    # What systemd sets for it ($CACHE_DIRECTORY) is where the model is kept.
    assert fastembed_cache_dir(config) == Path("/var/cache/paperbell/fastembed")
    assert values(unit_entries(UNIT.read_text()), "Service", "CacheDirectory") == ["paperbell"]
    (tmp_path / UNIT_NAME).write_text(unit)
    verify(tmp_path / UNIT_NAME)


@pytest.mark.parametrize(
    ("database", "cache_dir", "writable"),
    [
        ("sqlite:////var/lib/paperbell/pb.sqlite", None, ["/var/lib/paperbell"]),
        (
            "sqlite:////var/lib/paperbell/pb.sqlite",
            "/srv/paperbell/models",
            ["/var/lib/paperbell", "/srv/paperbell/models"],
        ),
        (
            "sqlite:////var/lib/paperbell/pb.sqlite",
            "/var/lib/paperbell/models",
            ["/var/lib/paperbell"],
        ),
        ("postgresql://paperbell@db.example.org/papers", "/srv/my models", ["/srv/my models"]),
        ("postgresql://paperbell@db.example.org/papers", "models", ["/etc/paperbell/models"]),
        ("postgresql://paperbell@db.example.org/papers", "../models", ["/etc/models"]),
    ],
)
def test_the_unit_lets_the_service_write_the_model_folder_the_config_names(
    database: str, cache_dir: str | None, writable: list[str]
) -> None:
    # ProtectSystem=strict: a cache_dir not in ReadWritePaths= is read-only to the service,
    # and fastembed failed to download its model there.
    config = with_fastembed(database, cache_dir)
    service = Service.of(config, user="paperbell", executable=("/opt/pb/bin/paperbell",))
    unit = unit_entries(render_unit(unit_template(), service))
    [paths] = values(unit, "Service", "ReadWritePaths")
    assert shlex.split(paths) == writable
    assert values(unit, "Service", "ProtectHome") == ["yes"]
    assert Path(writable[-1]) in {service.data_dir, service.model_dir}


def test_a_model_folder_in_a_home_gets_read_only_homes_and_a_step_to_make_it() -> None:
    config = with_fastembed("postgresql://db.example.org/papers", "/home/ada/paperbell-models")
    service = Service.of(config, user="ada", executable=("/opt/pb/bin/paperbell",))
    unit = unit_entries(render_unit(unit_template(), service))
    assert values(unit, "Service", "ProtectHome") == ["read-only"]
    assert values(unit, "Service", "ReadWritePaths") == ["/home/ada/paperbell-models"]
    # systemd refuses to start a unit whose ReadWritePaths= folder is missing.
    steps = next_steps(service, unit=None)
    assert "  sudo install -d -o ada -m 700 /home/ada/paperbell-models" in steps


def test_a_model_folder_in_a_temporary_folder_is_refused() -> None:
    config = with_fastembed("sqlite:////var/lib/paperbell/pb.sqlite", "/var/tmp/models")
    with pytest.raises(ConfigError) as refused:
        Service.of(config, user="ada", executable=("/opt/pb/bin/paperbell",))
    assert refused.value.problems == [
        "fastembed's model folder /var/tmp/models is in /var/tmp, which the service cannot "
        "see: its unit gives it an empty /var/tmp of its own (PrivateTmp=yes)"
    ]


def test_a_model_folder_under_a_tilde_is_refused() -> None:
    # `init` runs as the admin (under sudo: root), the service as its own user: "~" would
    # make another home writable than the one the service reads it as.
    config = with_fastembed("postgresql://db.example.org/papers", "~/models")
    with pytest.raises(ConfigError) as refused:
        Service.of(config, user="paperbell", executable=("/opt/pb/bin/paperbell",))
    assert refused.value.problems == [
        "[embeddings] cache_dir ~/models: give the folder from /, not from a home: `~` is "
        "the home of whoever runs paperbell, not the service's"
    ]


def test_a_model_folder_in_the_configs_folder_is_noted() -> None:
    config = with_fastembed("postgresql://db.example.org/papers", "/etc/paperbell")
    service = Service.of(config, user="paperbell", executable=("/opt/pb/bin/paperbell",))
    assert service.model_dir == Path("/etc/paperbell")
    assert next_steps(service, unit=None)[0] == (
        "note: fastembed's model folder is the config's folder, so the service may write "
        "there; better: leave [embeddings] cache_dir unset"
    )
