"""What `paperbell init --systemd` writes: the systemd unit of the repository
(deploy/paperbell.service, shipped in the package) with this machine's paths put in, and
the environment file that names the config's secrets, without a value.

Only makes the text; `init` (bot.cli.setup) writes the files and says what to do next.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from bot.cli.secrets import database_url
from bot.config import Config
from bot.config.likes import like_file_path
from bot.core.checks import redact_url
from bot.core.errors import ConfigError

UNIT_NAME = "paperbell.service"
ENV_FILE_NAME = "paperbell.env"
# ProtectHome=yes hides these; a paperbell installed (or configured) there needs read-only.
HOMES = (Path("/home"), Path("/root"), Path("/run/user"))
# PrivateTmp=yes gives the service empty ones of its own; both are emptied at boot too.
PRIVATE_TMP = (Path("/tmp"), Path("/var/tmp"))
MIN_STOP_SECONDS = 90  # systemd's own default
# A stop ends within [daemon] shutdown_grace_seconds and a second or so (one deadline for the
# whole stop: `Daemon.stop_deadline`); what systemd allows past the grace before it kills.
STOP_MARGIN_SECONDS = 30


@dataclass(frozen=True)
class Service:
    """What the unit says: the command it runs, as whom, with which secrets, where it may
    write (None: nowhere, the database is not a file), and how long a stop may take; and
    the other files the config names, which the service reads (what each is, where).
    `model_dir`: fastembed's model folder the config names outside the database's, which
    the service writes too (the default one is the unit's CacheDirectory=)."""

    command: tuple[str, ...]
    user: str
    env_file: Path
    data_dir: Path | None
    stop_seconds: int
    read_files: tuple[tuple[str, Path], ...] = ()
    model_dir: Path | None = None

    @classmethod
    def of(cls, config: Config, *, user: str, executable: tuple[str, ...]) -> Service:
        """The service that runs `paperbell run` on `config` (loaded from its file)."""
        from bot.pipeline.model_cache import configured_cache_dir
        from bot.store import database_file

        assert config.path is not None, "a config read from a file"
        for what, text in (("the config's path", str(config.path)), ("--user", user)):
            if not text.isprintable():
                raise ConfigError([f"{what} holds a control character: {text!r}"])
        database = database_file(database_url(config))
        data_dir = database.parent if database is not None else None
        grace = config.daemon.shutdown_grace_seconds
        model_dir = configured_cache_dir(config)
        if config.embeddings and str(config.embeddings.cache_dir or "").startswith("~"):
            raise ConfigError(
                [
                    f"[embeddings] cache_dir {config.embeddings.cache_dir}: give the folder "
                    "from /, not from a home: `~` is the home of whoever runs paperbell, not "
                    "the service's"
                ]
            )
        if model_dir is not None:  # systemd wants no ".." in a path
            model_dir = Path(os.path.normpath(model_dir))
            if data_dir is not None and model_dir.is_relative_to(data_dir):
                model_dir = None  # writable already, with the database's folder
        service = cls(
            command=(*executable, "run", "-c", str(config.path)),
            user=user,
            env_file=config.path.with_name(ENV_FILE_NAME),
            data_dir=data_dir,
            stop_seconds=max(MIN_STOP_SECONDS, math.ceil(grace) + STOP_MARGIN_SECONDS),
            read_files=tuple(
                (f"subscriber {sub.name}'s like_file", path)
                for sub in config.subscribers
                if (path := like_file_path(config, sub)) is not None
            ),
            model_dir=model_dir,
        )
        if hidden := service.paths_in_private_tmp():
            raise ConfigError(
                hidden,
                source="the unit",
                hint="keep what the service needs out of /tmp and /var/tmp, which are "
                "emptied at boot too: the config in /etc/paperbell/, a SQLite database in "
                "/var/lib/paperbell/, paperbell in /opt/paperbell/; then run init --systemd again",
            )
        return service

    def paths_in_private_tmp(self) -> list[str]:
        """What the service needs in /tmp or /var/tmp, each as a problem: PrivateTmp=yes
        hides them from it, so a unit on them fails at start."""
        executable = Path(self.command[0])
        needed = [
            ("the paperbell command", executable),
            ("the config file", Path(self.command[-1])),
        ]
        needed += [("the Python paperbell runs on", path) for path in python_paths(executable)]
        needed += self.read_files
        if self.data_dir is not None:
            needed.append(("the database's folder", self.data_dir))
        if self.model_dir is not None:
            needed.append(("fastembed's model folder", self.model_dir))
        problems = []
        for what, path in needed:
            for folder in PRIVATE_TMP:
                if path.is_relative_to(folder) or path.resolve().is_relative_to(folder):
                    problems.append(
                        f"{what} {path} is in {folder}, which the service cannot see: its unit "
                        f"gives it an empty {folder} of its own (PrivateTmp=yes)"
                    )
                    break
        return problems

    def protect_home(self) -> str:
        """`yes` (hidden), or `read-only` when a path the service reads lies in a home."""
        executable = Path(self.command[0])
        paths = [executable, *python_paths(executable), self.env_file]
        paths += self.written_dirs()
        paths += [path for _, path in self.read_files]
        inside = any(path.is_relative_to(home) for path in paths for home in HOMES)
        return "read-only" if inside else "yes"

    def written_dirs(self) -> list[Path]:
        """The folders the service writes, each made writable by ReadWritePaths=."""
        return [path for path in (self.data_dir, self.model_dir) if path is not None]


def python_paths(executable: Path) -> list[Path]:
    """Where the Python that runs `executable` lives: the interpreter its `#!` line names (or
    itself), links followed, and the Python a venv's pyvenv.cfg names (`home`). A venv
    outside the homes may run on a Python inside one (pyenv's, uv's), which the unit must
    not hide. None when `executable` is not on this machine."""
    try:
        with executable.open("rb") as file:
            first_line = file.readline(4096)
    except OSError:
        return []
    words = first_line[2:].split() if first_line.startswith(b"#!") else []
    interpreter = Path(os.fsdecode(words[0])) if words else executable
    try:
        found = [interpreter.resolve()]
    except (OSError, RuntimeError):  # a loop of links: the path as it is written
        found = [interpreter]
    try:
        venv_config = (interpreter.parent.parent / "pyvenv.cfg").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):  # not a venv
        return found
    for line in venv_config.splitlines():
        key, equals, value = line.partition("=")
        if equals and key.strip() == "home" and value.strip():
            found.append(Path(value.strip()))
    return found


def paperbell_executable() -> tuple[str, ...]:
    """How this paperbell was started, as an absolute command: the `paperbell` script that
    ran, the one beside this Python, else this Python with `-m bot.cli`."""
    started = Path(sys.argv[0])
    if started.name == "paperbell" and started.is_file():
        return (str(started.absolute()),)
    beside = Path(sys.executable).with_name("paperbell")
    if beside.is_file():
        return (str(beside),)
    return (sys.executable, "-m", "bot.cli")


def unit_template() -> str:
    """deploy/paperbell.service: the copy shipped in the package, else the checkout's."""
    packaged = files("bot") / "deploy" / UNIT_NAME
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    checkout = Path(__file__).resolve().parents[2] / "deploy" / UNIT_NAME
    return checkout.read_text(encoding="utf-8")


def render_unit(template: str, service: Service) -> str:
    """The unit: the template from `[Unit]` on, its "yours" lines set to `service`."""
    values = {
        "User": service.user,
        "ExecStart": " ".join(quote(arg, command=True) for arg in service.command),
        "EnvironmentFile": str(service.env_file).replace("%", "%%"),  # the rest of the line
        "ReadWritePaths": " ".join(quote(str(path)) for path in service.written_dirs()) or None,
        "ProtectHome": service.protect_home(),
        "TimeoutStopSec": str(service.stop_seconds),
    }
    body = template[template.index("[Unit]") :]
    lines = [
        f"# paperbell's daemon, written by `paperbell init --systemd` for {service.command[-1]}.",
        f"# Its secrets: {service.env_file} (VARIABLE=value lines, owned by root, chmod 600).",
        "",
    ]
    for line in body.splitlines():
        key = line.split("=", 1)[0]
        if line.startswith("# yours:"):
            continue
        if key in values and "=" in line:
            if values[key] is None:
                continue
            line = f"{key}={values[key]}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def render_env_file(config: Config) -> str:
    """The EnvironmentFile: a line `VARIABLE=` for each secret the config names, to fill in."""
    from bot.store import database_file

    lines = [
        f"# The secrets of {config.path}, for systemd's EnvironmentFile=: one",
        "# VARIABLE=value a line. Fill in each value; keep this file owned by root, chmod 600.",
    ]
    variables = config.secret_variables()
    for label, name in variables:
        lines += [f"# {label}", f"{name}="]
    if not variables:
        lines.append("# The config names no secret: nothing to fill in yet.")
    url = config.database.url
    if database_file(database_url(config)) is None and redact_url(url) == url:
        lines += [
            "# The database's password, when [database] url has none (libpq reads it):",
            "# PGPASSWORD=",
        ]
    return "\n".join(lines) + "\n"


def quote(arg: str, *, command: bool = False) -> str:
    """One word of a unit file's list: `%` (a specifier) doubled, quoted when it holds a
    space, a quote or a backslash; in a `command`, `$` (a variable) doubled too."""
    arg = arg.replace("%", "%%")
    if command:
        arg = arg.replace("$", "$$")
    if not any(c.isspace() or c in "\"'\\;" for c in arg):
        return arg
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
