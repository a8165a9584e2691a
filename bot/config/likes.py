"""The papers a config file's subscribers like: where each one's library export
(`like_file`) is, reading it (a missing, unreadable or oversized file is one clear
problem), and what `check-config` says of each.

The file is the subscriber's export from Zotero, Mendeley or a BibTeX manager; reading
its entries is bot.similar.library's. Must not open the database or the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.config.schema import Config
from bot.config.subscribers import SubscriberConfig
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
    path = Path(sub.like_file).expanduser()
    if not path.is_absolute() and config.path is not None:
        path = config.path.parent / path
    return path


def stat_like_file(path: Path) -> LikeFile:
    """The file's size and time of change. Raises LibraryError when there is no file."""
    try:
        found = path.stat()
    except FileNotFoundError:
        raise LibraryError(f"{path}: no such file") from None
    except OSError as exc:
        raise LibraryError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    return LikeFile(path, found.st_size, found.st_mtime_ns)


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
    except OSError as exc:
        raise LibraryError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    return read_library(data, name=str(path))


def like_file_report(config: Config) -> tuple[list[str], list[str]]:
    """What `check-config` says of the subscribers' like_files: the problems (a file that
    is missing or cannot be read at all) and the lines (what each file gave, its skipped
    entries one by one)."""
    problems: list[str] = []
    lines: list[str] = []
    for index, sub in enumerate(config.subscribers):
        path = like_file_path(config, sub)
        if path is None:
            continue
        who = f"subscribers[{index}] {sub.name}: like_file"
        try:
            library = read_like_file(path)
        except LibraryError as exc:
            problems.append(f"{who}: {exc}")
            continue
        lines.append(f"{who} {path.name}: {library.summary()}")
        lines += [f"{who} {path.name}: skipped {line}" for line in library.skipped_lines()]
    return problems, lines
