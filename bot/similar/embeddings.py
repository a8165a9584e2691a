"""`EmbeddingsEndpoint`: where papers like these get their vectors, as the ranking takes it.

Made once at start from [embeddings]; light to import (no numpy, no client library), so a
site where nobody gave a verdict never loads them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.similar.endpoint import EmbeddingsClient, FastembedEmbedder

__all__ = ["EmbeddingsEndpoint"]


@dataclass(frozen=True)
class EmbeddingsEndpoint:
    """An OpenAI-compatible endpoint (`provider` "openai") or a local fastembed model, and
    how long one run may wait for its vectors. Each run opens its own client (`open`)."""

    provider: str  # "openai" or "fastembed"
    model: str
    base_url: str | None = None  # required for "openai"
    api_key: str | None = None
    timeout: float = 60.0
    max_retries: int = 2
    batch_size: int = 64
    deadline_seconds: float = 120.0  # every request of one run together
    capped_client: Callable[[int], Any] | None = None  # makes HTTP clients with a size cap
    cache_dir: Path | None = None  # where fastembed keeps its model (None: fastembed's own)

    @property
    def kind(self) -> str:
        """The vectors' name in the store: the provider and model (each model's own)."""
        return f"{self.provider}:{self.model}"

    def open(self) -> EmbeddingsClient | FastembedEmbedder:
        """A client for one run (EmbeddingsFailure: fastembed is not installed, or its
        model cannot be loaded)."""
        from bot.similar.endpoint import EmbeddingsClient, FastembedEmbedder

        if self.provider == "fastembed":
            return FastembedEmbedder(
                self.model, batch_size=self.batch_size, cache_dir=self.cache_dir
            )
        assert self.base_url is not None  # checked by the config
        return EmbeddingsClient(
            base_url=self.base_url,
            model=self.model,
            api_key=self.api_key,
            timeout=self.timeout,
            batch_size=self.batch_size,
            max_retries=self.max_retries,
            capped_client=self.capped_client,
        )
