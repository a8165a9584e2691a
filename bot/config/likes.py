"""The papers a config file's subscribers like: where each one's library export
(`like_file`) is, reading it (a missing, unreadable or oversized file is one clear
problem), and what `check-config` says of each.

The file is the subscriber's export from Zotero, Mendeley or a BibTeX manager; reading
its entries is bot.similar.library's. Must not open the database or the network.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ConfigDict, TypeAdapter, ValidationError

from bot.config.fields import FilePath
from bot.config.load import read_config_data
from bot.config.schema import Config
from bot.config.subscribers import SubscriberConfig
from bot.core.errors import ConfigError
from bot.similar.library import MAX_LIBRARY_BYTES, Library, LibraryError, read_library


@dataclass(frozen=True, slots=True)
class LikeFile:
    """A subscriber's like_file: where it is, and its size and time of change (read again
    when either changes)."""

    path: Path
    size: int
    mtime_ns: int

    @property
    def signature(self) -> tuple[int, int]:
        return self.size, self.mtime_ns


def like_file_path(config: Config, sub: SubscriberConfig) -> Path | None:
    """The subscriber's like_file, a relative path taken from the config file's folder."""
    if sub.like_file is None:
        return None
    return _path(sub.like_file, config.path.parent if config.path is not None else None)


def _path(like_file: str, folder: Path | None) -> Path:
    path = Path(like_file).expanduser()
    return folder / path if not path.is_absolute() and folder is not None else path


def stat_like_file(path: Path) -> LikeFile:
    """The file's size and time of change. Raises LibraryError when there is no file."""
    try:
        found = path.stat()
    except FileNotFoundError:
        raise LibraryError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise LibraryError(f"{path}: cannot read the file: {_why(exc)}") from None
    return LikeFile(path, found.st_size, found.st_mtime_ns)


def _why(exc: Exception) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def read_like_file(path: Path) -> Library:
    """A like_file's entries. Raises LibraryError saying what is wrong: no such file, a
    folder, unreadable, larger than 20 MB, in no known format."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_LIBRARY_BYTES + 1)
    except FileNotFoundError:
        raise LibraryError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise LibraryError(f"{path}: a folder, not a library file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise LibraryError(f"{path}: cannot read the file: {_why(exc)}") from None
    return read_library(data, name=str(path))


def like_file_report(config: Config) -> tuple[list[str], list[str]]:
    """What `check-config` says of the subscribers' like_files: the problems (a file that
    is missing or cannot be read at all, at its key: `subscribers[0].like_file: …`) and the
    lines (what each file gave, its skipped entries one by one)."""
    folder = config.path.parent if config.path is not None else None
    declared = [(n, sub.name, sub.like_file) for n, sub in enumerate(config.subscribers)]
    return _report(declared, folder)


def like_file_problems(path: Path) -> list[str]:
    """The like_file problems of a config file that did not validate (so that
    `check-config` lists them with the others): each subscriber table's `like_file`
    that is a path, read; the file's other problems are the schema's."""
    try:
        data = read_config_data(path)
    except ConfigError:
        return []  # the file itself is the problem: said already
    subscribers = data.get("subscribers")
    declared = [
        (n, str(sub.get("name", "")), sub.get("like_file"))
        for n, sub in enumerate(subscribers if isinstance(subscribers, list) else [])
        if isinstance(sub, dict)
    ]
    usable = [(n, name, found) for n, name, file in declared if (found := _usable(file))]
    return _report(usable, path.resolve().parent)[0]


# A like_file as the schema takes it: what it refuses is its problem, not read here.
_LIKE_FILE: TypeAdapter[str] = TypeAdapter(FilePath, config=ConfigDict(str_strip_whitespace=True))


def _usable(value: object) -> str | None:
    try:
        return _LIKE_FILE.validate_python(value)
    except ValidationError:
        return None


def _report(
    declared: Sequence[tuple[int, str, str | None]], folder: Path | None
) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    lines: list[str] = []
    for index, name, like_file in declared:
        if like_file is None:
            continue
        path = _path(like_file, folder)
        try:
            library = read_like_file(path)
        except LibraryError as exc:
            problems.append(f"subscribers[{index}].like_file: {exc}")
            continue
        who = f"subscribers[{index}] {name}: like_file {path.name}"
        lines.append(f"{who}: {library.summary()}")
        lines += [f"{who}: skipped {line}" for line in library.skipped_lines()]
    return problems, lines
