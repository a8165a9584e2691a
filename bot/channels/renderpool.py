"""Rendering on every core: a large delivery run's digests rendered in worker processes.

Owns the render pool of one run (`RenderPool`): worker processes, started fresh (spawned:
nothing of the parent's threads, connections or event loop is inherited), each holding the
run's papers, the channel kinds' render settings and the run's links (`Linker`), that
render the digests they are handed and return the bytes to queue. A worker imports the
channels and renderers alone (no database, config or sources: ~50 MB). Rendering is most
of a digest's cost; the parent plans, builds, queues and sends meanwhile, so a two-core
machine renders and sends at once, and the parent's event loop (the daemon's web app, its
slash command) is not held by templates.

What travels is small: a digest's papers go as their place in the run's papers (written
once to a file each worker reads before its first digest), and what comes back is each
digest's payload, with the digest it shows only where the channel cut it. It is pickled
with a reducer for each model it is made of (its fields' values, read back by its
constructor), looked up by the pickler itself: nothing is called for the thousands of
strings, numbers and tuples of a share. The workers may be started before the run's
papers are known (`RenderPool(..., papers=None)`, then `load(papers)`): a run starts them
before it plans, so that they are ready when its first digests are (starting one takes a
second or so), and none is rendered here meanwhile.

A worker touches no database and sends nothing: the parent queues and sends exactly as
when it renders itself, so every rule of the outbox (once per period, recorded after the
send) holds unchanged. A digest a worker could not render is rendered again by the caller
(it reports the error if it fails there too).

A worker that dies (killed, out of memory) breaks the pool: the parent renders the rest
of the run itself (`render` raises `PoolBroken`; `bot.pipeline.deliver` falls back), so a
run never loses a digest to it. A worker's rendered share is written to a file of the
pool's folder and only the file's name goes back through the pool's pipe: a worker killed
while it wrote megabytes into the pipe would leave half a message there, and the pool's
reader, waiting for the rest, the run waiting for ever; a name is written to a pipe in
one piece, and a file half written is never named.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copyreg
import dataclasses
import inspect
import io
import logging
import multiprocessing
import operator
import os
import pickle
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import IO, Any

from bot.channels import channel_kind, load_builtin_channels
from bot.channels.base import RenderContext, Target
from bot.channels.linking import Linker
from bot.core.models import Digest, DigestGroup, DigestItem, Hit, Paper, PaperTexts, Subscriber
from bot.core.schedule import Schedule
from bot.render import compile_templates

log = logging.getLogger(__name__)


class PoolBroken(Exception):
    """A worker died: the pool renders no more (the caller renders the rest itself)."""


@dataclass(frozen=True, slots=True)
class Result:
    """One digest rendered in a worker: its payload and the digest it shows (None: the
    digest handed over, unchanged), or why it could not be rendered."""

    payload: bytes | None
    shown: Digest | None = None
    error: str | None = None


class RenderPool:
    """Worker processes rendering one run's digests (see the module's docstring)."""

    def __init__(
        self,
        settings: Mapping[str, Any],
        linker: Linker,
        papers: Sequence[Paper] | None = None,
        *,
        workers: int,
    ) -> None:
        """Workers rendering with each kind's render `settings` (what its renderer reads:
        plain data, no connection), the run's `linker`, and its `papers` (None: handed
        over later, by `load`, before the first `render`)."""
        self._papers: list[Paper] = []
        self._places: dict[int, int] = {}
        self._file: str | None = None  # the papers, pickled, where each worker reads them
        self._folder: str | None = None  # holds the papers file and the rendered shares
        self.workers = workers
        self.broken = False
        self._executor: concurrent.futures.ProcessPoolExecutor | None = None
        self._warm: list[concurrent.futures.Future[bool]] = []
        # Every worker started now. Starting one blocks until it has read its setup, after
        # importing the renderers (a second or so): in a thread, so that the event loop
        # goes on meanwhile.
        self._starter = threading.Thread(
            target=self._start_all, args=(settings, linker), name="render-pool", daemon=True
        )
        self._starter.start()
        if papers is not None:
            self.load(papers)

    def load(self, papers: Sequence[Paper]) -> None:
        """Hand the workers the run's papers (once, before the first `render`): pickled
        into a file of the pool's folder (a few hundredths of a second for a day's), read
        by each worker before its first digest; the workers write their rendered shares
        into the same folder."""
        if self._file is not None:
            raise RuntimeError("the render pool has its papers already")
        self._papers = list(papers)
        self._places = {id(paper): index for index, paper in enumerate(self._papers)}
        folder = tempfile.mkdtemp(prefix="paperbell-rendered-")
        path = os.path.join(folder, "papers.pickle")
        try:
            with open(path, "wb") as file:
                _dump(self._papers, file, {})
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self._folder, self._file = folder, path

    def _start_all(self, settings: Mapping[str, Any], linker: Linker) -> None:
        setup = (pickle.dumps((dict(settings), linker)),)
        executor = concurrent.futures.ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start,
            initargs=setup,
        )
        self._executor = executor
        with contextlib.suppress(RuntimeError):  # closed meanwhile: none to start
            self._warm = [executor.submit(_ready) for _ in range(self.workers)]

    @property
    def ready(self) -> bool:
        """Whether every worker has started and the papers are loaded (until then, the
        caller renders itself)."""
        started = not self._starter.is_alive() and all(future.done() for future in self._warm)
        return started and self._file is not None

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until every worker has started (a test's steady state); False: not yet."""
        self._starter.join(timeout)
        done, _ = concurrent.futures.wait(self._warm, timeout=timeout)
        return not self._starter.is_alive() and len(done) == len(self._warm)

    def pids(self) -> list[int]:
        """The workers' process ids."""
        return list(getattr(self._executor, "_processes", None) or {})

    def _started(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._executor is None:  # `render` is asked only once `ready`
            raise PoolBroken("the render workers did not start")
        return self._executor

    async def render(self, pairs: Sequence[tuple[Digest, Target]]) -> list[Result]:
        """Each digest rendered for its target, in a worker. Raises PoolBroken when a
        worker died (then and ever after)."""
        if self.broken:
            raise PoolBroken("a render worker died earlier in this run")
        if self._file is None:
            raise RuntimeError("the render pool was given no papers (`load`)")
        blob = _dumps(list(pairs), self._places)
        loop = asyncio.get_running_loop()
        try:
            job = self._started().submit(_render, self._file, blob)
            answer = await asyncio.wrap_future(job, loop=loop)
        except BrokenProcessPool as exc:
            self.broken = True
            raise PoolBroken(f"a render worker died: {exc}") from None
        try:
            with open(answer, "rb") as file:
                results: list[Result] = _load(file, self._papers)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(answer)
        return results

    def close(self) -> None:
        """Stop the workers: the shares not begun are dropped (their digests were not
        queued: a later run makes them), one being rendered is finished, and the workers
        are waited for (left to exit on their own, a worker of a process that is itself
        a multiprocessing child waits for ever for a word that never comes)."""
        self._starter.join()
        try:
            if self._executor is not None:
                self._executor.shutdown(wait=True, cancel_futures=True)
        finally:
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)

    async def aclose(self) -> None:
        """`close`, in a thread: the event loop goes on while the workers stop."""
        await asyncio.to_thread(self.close)


# What a worker holds for the run (set by `_start`, in the worker only).
_WORKER: dict[str, Any] = {}


def _start(setup_blob: bytes) -> None:
    # Ctrl-C in a terminal reaches the whole process group: the main process stops the
    # run (and its workers) as it stops; a worker interrupted on its own would only add
    # a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    load_builtin_channels()
    settings, linker = pickle.loads(setup_blob)
    _WORKER.update(
        context=RenderContext(linker.now, settings, links=linker.links, votes=linker.votes),
    )
    # Compiled while the run is planned (a worker starts before the plan), not when the
    # first share, which the first message waits for, is rendered.
    compile_templates("email")


def _papers(file: str) -> list[Paper]:
    """In a worker: the run's papers, read from `file` the first time."""
    if _WORKER.get("file") != file:
        with open(file, "rb") as handle:
            papers: list[Paper] = _load(handle, [])
        _WORKER.update(
            file=file,
            papers=papers,
            places={id(paper): index for index, paper in enumerate(papers)},
        )
    found: list[Paper] = _WORKER["papers"]
    return found


def _ready() -> bool:
    return True


def _render(file: str, blob: bytes) -> str:
    """In a worker: a part of a run rendered (see `RenderPool.render`), its papers read
    from `file`; the name of the file beside it the results were written to."""
    papers = _papers(file)
    context: RenderContext = _WORKER["context"]
    pairs: list[tuple[Digest, Target]] = _loads(blob, papers)
    results = []
    for digest, target in pairs:
        kind = channel_kind(target.channel)
        try:
            if kind is None:
                raise ValueError(f"no channel kind {target.kind!r} is known")
            rendered = kind.render(digest, target, context)
        except ValueError as exc:
            results.append(Result(None, error=str(exc)))
            continue
        shown = None if rendered.digest is digest else rendered.digest
        results.append(Result(rendered.payload, shown))
    handle, path = tempfile.mkstemp(dir=os.path.dirname(file), suffix=".pickle")
    with os.fdopen(handle, "wb") as answer:
        _dump(results, answer, _WORKER["places"])
    return path


def _dumps(value: object, places: dict[int, int]) -> bytes:
    """`value` pickled, each of the run's papers as its place (`places`: by object id)."""
    buffer = io.BytesIO()
    _dump(value, buffer, places)
    return buffer.getvalue()


def _dump(value: object, file: IO[bytes], places: dict[int, int]) -> None:
    """`value` pickled into `file` (a large payload written there at once, not copied into
    a buffer first), each of the run's papers as its place."""
    pickler = pickle.Pickler(file, protocol=pickle.HIGHEST_PROTOCOL)
    # Reducers by exact type, looked up by the C pickler itself: no Python called for
    # the thousands of strings, numbers and tuples of a share, as a `persistent_id` was.
    table = copyreg.dispatch_table.copy()
    table.update(_REDUCERS)
    whole = _REDUCERS.get(Paper, operator.methodcaller("__reduce_ex__", pickle.HIGHEST_PROTOCOL))

    def paper(paper: Paper) -> tuple[Any, ...]:
        place = places.get(id(paper))
        return whole(paper) if place is None else (_paper_at, (place,))

    table[Paper] = paper
    pickler.dispatch_table = table
    pickler.dump(value)


def _loads(blob: bytes, papers: Sequence[Paper]) -> Any:
    return _load(io.BytesIO(blob), papers)


def _load(file: IO[bytes], papers: Sequence[Paper]) -> Any:
    """What `_dump` wrote to `file`, each paper's place read as that paper of `papers`."""
    return _PaperUnpickler(file, papers).load()


def _paper_at(place: int) -> Paper:
    """A paper by its place in the run's papers, as a pickle names it: the pool's unpickler
    reads the name as a lookup in its own papers; any other refuses it here."""
    raise pickle.UnpicklingError("a paper by its place is read only with the run's papers")


class _PaperUnpickler(pickle.Unpickler):
    def __init__(self, file: IO[bytes], papers: Sequence[Paper]) -> None:
        super().__init__(file)
        self._papers = papers

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == _paper_at.__name__:
            return self._paper_at
        return super().find_class(module, name)

    def _paper_at(self, place: Any) -> Paper:
        if type(place) is not int or not 0 <= place < len(self._papers):
            raise pickle.UnpicklingError(f"no paper at place {place!r}")
        return self._papers[place]


def _by_fields(cls: type) -> Callable[[Any], tuple[Any, ...]] | None:
    """A reducer for the frozen dataclass `cls`: its fields' values (`dataclasses.fields`,
    so a field added travels too), read back by its generated `__init__`, not by the
    `__getstate__` and `__setstate__` the dataclass makes (each a Python loop over
    `fields()`, for each object pickled or read: most of a share's cost both ways).
    None when the constructor does not take exactly the fields, in order (a field not
    in `__init__`, keyword-only, an InitVar, a `__post_init__`): pickled as ever then."""
    names = [item.name for item in dataclasses.fields(cls)]
    parameters = inspect.signature(cls).parameters.values()
    positional = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
    if positional != names or len(parameters) != len(names) or hasattr(cls, "__post_init__"):
        return None
    values = operator.attrgetter(*names)
    if len(names) == 1:
        return lambda obj: (cls, (values(obj),))
    return lambda obj: (cls, values(obj))


# The dataclasses a share and its results are made of: each pickled as its fields' values.
_TRAVELLING: tuple[type, ...] = (Digest, DigestGroup, DigestItem, Paper, PaperTexts, Subscriber)
_TRAVELLING += (Schedule, Target, Result)
_REDUCERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {
    cls: reducer for cls in _TRAVELLING if (reducer := _by_fields(cls)) is not None
}
# A highlight's hit (a named tuple: tens a digest), built again from its values, without
# the `__getnewargs__` the pickler would call for each.
_REDUCERS[Hit] = lambda hit: (Hit, tuple(hit))
