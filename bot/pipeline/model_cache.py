"""Where fastembed keeps the model it downloads: a folder that lasts.

Never fastembed's own default, under the temp folder: a systemd service's private /tmp is
emptied at each start, so the model was downloaded again at every start (and not at all
on a server that cannot reach the internet). Reads the environment the config was loaded
with, never the process's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from bot.config import Config
from bot.store.database import database_file

FASTEMBED_FOLDER = "fastembed"  # the model's folder, beside the SQLite database or in a cache
APP_FOLDER = "paperbell"  # paperbell's own folder in a user's cache folder


def fastembed_cache_dir(config: Config) -> Path | None:
    """Where fastembed keeps its model (None: the config uses no fastembed): the folder the
    config names or implies (`configured_cache_dir`), else a cache folder of the
    environment's (`environment_cache_dir`)."""
    e = config.embeddings
    if e is None or e.provider != "fastembed":
        return None
    return configured_cache_dir(config) or environment_cache_dir(config.environ)


def configured_cache_dir(config: Config) -> Path | None:
    """[embeddings] cache_dir (a relative path from the config file's folder), else a
    `fastembed` folder beside the SQLite database; None: neither (PostgreSQL)."""
    e = config.embeddings
    if e is None or e.provider != "fastembed":
        return None
    if e.cache_dir is not None:
        path = Path(e.cache_dir).expanduser()
        if path.is_absolute() or config.path is None:
            return path
        return config.path.parent / path
    database = database_file(config.database_url())
    return database.parent / FASTEMBED_FOLDER if database is not None else None


def environment_cache_dir(environ: Mapping[str, str]) -> Path | None:
    """fastembed's own FASTEMBED_CACHE_PATH when set; else the folder systemd made for the
    service (CacheDirectory=: $CACHE_DIRECTORY) and `fastembed` in it; else the user's cache
    folder ($XDG_CACHE_HOME, else ~/.cache) and `paperbell/fastembed` in it. None: no home
    to keep it in, or one this process cannot make it in (fastembed's own choice then)."""
    if chosen := environ.get("FASTEMBED_CACHE_PATH"):
        return Path(chosen)
    # systemd sets a list when the unit names several folders: paperbell's unit names one.
    service_cache = environ.get("CACHE_DIRECTORY", "").split(":")[0]
    if Path(service_cache).is_absolute():
        return Path(service_cache) / FASTEMBED_FOLDER
    # The XDG Base Directory spec: an unset, empty or relative XDG_CACHE_HOME is ~/.cache.
    xdg_cache = environ.get("XDG_CACHE_HOME", "")
    home = environ.get("HOME", "")
    if Path(xdg_cache).is_absolute():
        folder = Path(xdg_cache) / APP_FOLDER / FASTEMBED_FOLDER
    elif Path(home).is_absolute():
        folder = Path(home) / ".cache" / APP_FOLDER / FASTEMBED_FOLDER
    else:
        return None
    return folder if _can_make(folder) else None


def _can_make(folder: Path) -> bool:
    """Whether this process may make `folder`: its nearest existing folder is one it may
    write in. A home of "/" (a uid a container does not know) or one never made (a system
    user's) has none."""
    for existing in (folder, *folder.parents):
        if existing.exists():
            return existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)
    return False
