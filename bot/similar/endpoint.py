"""Dense embeddings of papers' texts: any OpenAI-compatible `/v1/embeddings` endpoint (Ollama's
nomic-embed-text, text-embeddings-inference, a provider) through the official `openai`
client pointed at its `base_url`, or a local model through fastembed (the optional extra
`paperbell[fastembed]`).

`EmbeddingsClient.embed(texts, deadline=...)` gives one unit-free float32 row per text, asked
`batch_size` texts at a time, each text cut at `MAX_TEXT` characters; the client retries
429/5xx (honouring Retry-After), timeouts and dropped connections `max_retries` times; the
whole call stops at `deadline` seconds. The answer is untrusted: a batch whose count,
dimension or numbers are wrong (NaN, infinite, not numbers, a different dimension from the
batch before) fails the call with `EmbeddingsFailure` ("bad answer"), as does any refusal,
with a short stable `reason` and a `detail` for the log. The caller falls back to the
default ranking (bot.similar.ranking).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import openai

from bot.core.errors import AnswerTooLarge
from bot.similar.text import MAX_TEXT

__all__ = [
    "MAX_BATCH",
    "MAX_DIMENSION",
    "Embedder",
    "EmbeddingsClient",
    "EmbeddingsFailure",
    "FastembedEmbedder",
    "check_vectors",
]

MAX_BATCH = 2048  # texts in one request (OpenAI's own limit)
MAX_DIMENSION = 8192  # numbers in one vector: more is no embedding model we know
# The most one number of an answer may take, as JSON ("-0.012345678901234567, "): an
# answer past batch_size * MAX_DIMENSION of them (and a megabyte) is not read on.
MAX_NUMBER_BYTES = 24
NO_KEY = "no-key"  # sent as the key to a server that takes none (a local one)
FASTEMBED_MISSING = (
    "fastembed is not installed: pip install 'paperbell[fastembed]' (it downloads its "
    "model once, on first use), or point [embeddings] base_url at an endpoint"
)


class EmbeddingsFailure(Exception):
    """Texts that could not be embedded, and why (`reason`: short and stable)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def check_vectors(
    answer: object, count: int, dimension: int | None = None
) -> npt.NDArray[np.float32]:
    """The `count` vectors of an answer's `data` (OpenAI's shape: a list of objects with an
    `index` and an `embedding`), checked; EmbeddingsFailure("bad answer") otherwise."""
    data = _field(answer, "data")
    if not isinstance(data, list) or len(data) != count:
        got = len(data) if isinstance(data, list) else type(data).__name__
        raise EmbeddingsFailure("bad answer", f"{count} vectors asked for, got {got}")
    rows: list[Any] = [None] * count
    for position, item in enumerate(data):
        index = _field(item, "index")
        if index is None:
            index = position
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
            raise EmbeddingsFailure("bad answer", f"vector {position}: bad index {index!r}")
        if rows[index] is not None:
            raise EmbeddingsFailure("bad answer", f"vector {index} given twice")
        vector = _field(item, "embedding")
        if not isinstance(vector, list) or not 0 < len(vector) <= MAX_DIMENSION:
            raise EmbeddingsFailure("bad answer", f"vector {index}: not a list of numbers")
        if not all(type(v) in (int, float) for v in vector):
            raise EmbeddingsFailure("bad answer", f"vector {index}: not all numbers")
        rows[index] = vector
    dimensions = {len(row) for row in rows}
    if len(dimensions) != 1 or (dimension is not None and dimensions != {dimension}):
        raise EmbeddingsFailure("bad answer", f"vectors of dimension {sorted(dimensions)[:3]}")
    try:
        matrix = np.asarray(rows, dtype=np.float64)
    except (OverflowError, ValueError, TypeError) as exc:  # an integer of 400 digits
        raise EmbeddingsFailure("bad answer", f"numbers out of range ({exc})") from None
    if not np.all(np.isfinite(matrix)) or np.any(np.abs(matrix) > 1e30):
        raise EmbeddingsFailure("bad answer", "a vector with NaN or infinite numbers")
    if np.any(~matrix.any(axis=1)):
        raise EmbeddingsFailure("bad answer", "an all-zero vector")
    return matrix.astype(np.float32)


def _field(item: object, name: str) -> Any:
    if isinstance(item, dict):
        return item.get(name)
    return getattr(item, name, None)


class EmbeddingsClient:
    """An OpenAI-compatible embeddings endpoint and model (an async context manager)."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        batch_size: int = 64,
        max_retries: int = 2,
        capped_client: Callable[[int], Any] | None = None,
    ) -> None:
        self.model = model
        self.batch_size = max(1, min(batch_size, MAX_BATCH))
        import openai  # here, not at the top: ~50 MB and half a second, for runs that ask no model

        max_answer = self.batch_size * MAX_DIMENSION * MAX_NUMBER_BYTES + 1024 * 1024
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or NO_KEY,
            timeout=timeout,
            max_retries=max_retries,
            # An HTTP client that reads no answer past its cap (None: the openai client's own).
            http_client=capped_client(max_answer) if capped_client else None,
        )

    async def __aenter__(self) -> EmbeddingsClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._client.close()

    async def embed(self, texts: Sequence[str], *, deadline: float) -> npt.NDArray[np.float32]:
        """One vector per text (rows in order); EmbeddingsFailure when any batch fails or
        the whole takes longer than `deadline` seconds."""
        started = time.monotonic()
        try:
            async with asyncio.timeout(deadline):
                rows: list[npt.NDArray[np.float32]] = []
                dimension: int | None = None
                for start in range(0, len(texts), self.batch_size):
                    batch = [t[:MAX_TEXT] or " " for t in texts[start : start + self.batch_size]]
                    vectors = check_vectors(await self._ask(batch), len(batch), dimension)
                    dimension = vectors.shape[1]
                    rows.append(vectors)
        except TimeoutError:
            spent = time.monotonic() - started
            raise EmbeddingsFailure("timeout", f"not done within {spent:.0f} s") from None
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack(rows)

    async def _ask(self, batch: list[str]) -> Any:
        import openai  # here, not at the top: ~50 MB and half a second, for runs that ask no model

        try:
            return await self._client.embeddings.create(
                model=self.model, input=batch, encoding_format="float"
            )
        except openai.APITimeoutError:
            raise EmbeddingsFailure("timeout", "no answer in time") from None
        except openai.APIConnectionError as exc:
            raise EmbeddingsFailure("unreachable", _short(str(exc.__cause__ or exc))) from None
        except openai.APIStatusError as exc:
            raise EmbeddingsFailure(_status_reason(exc.status_code), _said(exc)) from None
        except AnswerTooLarge as exc:
            raise EmbeddingsFailure("too large", str(exc)) from None
        except (openai.OpenAIError, ValueError, TypeError) as exc:  # not JSON, wrong shape
            raise EmbeddingsFailure("bad answer", _short(str(exc))) from None


def _status_reason(status: int) -> str:
    return {401: "bad key", 403: "forbidden", 404: "no such model", 429: "rate limited"}.get(
        status, "server error" if status >= 500 else "bad request"
    )


def _said(exc: openai.APIStatusError) -> str:
    return f"HTTP {exc.status_code}: {_short(str(exc.message))}"


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "…"


class FastembedEmbedder:
    """A local model through fastembed (the optional extra); it downloads its model once,
    into `cache_dir` (None: fastembed's own choice, under the temp folder)."""

    def __init__(self, model: str, *, batch_size: int = 64, cache_dir: Path | None = None) -> None:
        try:
            from fastembed import TextEmbedding  # type: ignore[import-not-found]
        except ImportError:
            raise EmbeddingsFailure("not installed", FASTEMBED_MISSING) from None
        self.model = model
        self.batch_size = batch_size
        self.cache_dir = cache_dir
        try:
            self._model = TextEmbedding(
                model_name=model, cache_dir=None if cache_dir is None else str(cache_dir)
            )
        except Exception as exc:
            raise EmbeddingsFailure("unavailable", _short(str(exc))) from None

    async def embed(self, texts: Sequence[str], *, deadline: float) -> npt.NDArray[np.float32]:
        def work() -> npt.NDArray[np.float32]:
            found = list(
                self._model.embed([t[:MAX_TEXT] for t in texts], batch_size=self.batch_size)
            )
            answer = {
                "data": [
                    {"index": n, "embedding": list(map(float, v))} for n, v in enumerate(found)
                ]
            }
            return check_vectors(answer, len(texts))

        try:
            async with asyncio.timeout(deadline):
                return await asyncio.to_thread(work)
        except TimeoutError:
            raise EmbeddingsFailure("timeout", f"not done within {math.ceil(deadline)} s") from None


class Embedder(Protocol):
    """What embeds texts for a run: `EmbeddingsClient` or `FastembedEmbedder`."""

    model: str
    batch_size: int

    async def embed(self, texts: Sequence[str], *, deadline: float) -> npt.NDArray[np.float32]: ...
