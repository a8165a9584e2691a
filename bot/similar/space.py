"""The day's papers as vectors, computed once per run: the space every subscriber's model is
scored in.

Two kinds:

- `hashed` (the default; nothing leaves the machine, nothing to download): words of the
  title and abstract hashed into a fixed 2^18 features (scikit-learn's HashingVectorizer: the
  same word is the same feature on every day, so a model fitted once is scored on later
  days), counts damped (1 + log), weighted by inverse document frequency over the day's
  papers, rows of unit length. Beside it, a dense view of the day: latent semantic analysis
  (a truncated SVD of the day's matrix), where papers that say the same thing in other words
  still meet; it is recomputed each run and never stored.
- `dense`: one vector per paper from an embedding model (the endpoint's or fastembed's),
  rows of unit length; the dense view is the vectors themselves.

A liked or disliked paper is kept by its model as a raw row (`raw` counts, or an embedding)
and weighed into today's space by `Day.weigh`. Pure: no I/O, no clock.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from bot.similar.text import readable

__all__ = ["FEATURES", "HASHED", "LSA_COMPONENTS", "Day", "raw_counts", "similarity"]

HASHED = "hashed-v1"  # the default space's name (a stored model says which space it is for)
FEATURES = 2**18
LSA_COMPONENTS = 100  # measured on the real day: 50-150 alike (bench/similar.py)
LSA_MIN_PAPERS = 30  # fewer papers: no dense view (the sparse rows stand in)
Floats = npt.NDArray[np.float32]
Matrix: TypeAlias = Any  # rows: a scipy.sparse CSR matrix or a float32 ndarray


@functools.cache
def _vectoriser() -> Any:
    """The hashing vectoriser, made when first needed: scikit-learn takes a second and
    tens of megabytes to load, and most runs rank nothing."""
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(
        n_features=FEATURES,
        alternate_sign=False,
        norm=None,
        stop_words="english",
        token_pattern=r"(?u)\b[^\W\d_][\w-]*\w\b",  # words of 2+ characters, a letter first
        preprocessor=lambda text: readable(text).lower(),
        dtype=np.float32,
    )


def raw_counts(texts: Sequence[str]) -> sp.csr_matrix:
    """The texts' damped word counts in the hashed space (1 + log count), one row each."""
    if not texts:
        return sp.csr_matrix((0, FEATURES), dtype=np.float32)
    counts = _vectoriser().transform(list(texts)).tocsr()
    counts.data = (1.0 + np.log(counts.data)).astype(np.float32)
    return counts


@dataclass(frozen=True)
class Day:
    """The day's candidate papers as vectors: `ids` (row order), `sparse` (unit rows, the
    space models are fitted in), `dense` (unit rows: LSA or embeddings; None for a day too
    small for LSA), and how to bring a kept row into this space (`weigh`)."""

    kind: str
    ids: tuple[str, ...]
    sparse: Matrix
    dense: Floats | None
    idf: Floats | None = None  # hashed: the day's inverse document frequencies
    lsa: Floats | None = None  # hashed: the SVD's components over `lsa_columns`
    lsa_columns: npt.NDArray[np.int64] | None = None

    @classmethod
    def hashed(cls, ids: Sequence[str], texts: Sequence[str], *, seed: int = 0) -> Day:
        """The default space over the day's texts (title and abstract per paper)."""
        if len(ids) != len(texts):
            raise ValueError("one text per paper")
        counts = raw_counts(texts)
        n = counts.shape[0]
        df = np.bincount(counts.indices, minlength=FEATURES).astype(np.float32)
        idf = (np.log((1.0 + n) / (1.0 + df)) + 1.0).astype(np.float32)
        weighted = counts.copy()
        weighted.data *= idf[weighted.indices]
        rows = _unit(weighted)
        dense = lsa = columns = None
        if n >= LSA_MIN_PAPERS:
            columns = np.unique(rows.indices)
            k = min(LSA_COMPONENTS, n - 1, len(columns) - 1)
            if k >= 2:
                from sklearn.decomposition import TruncatedSVD

                svd = TruncatedSVD(k, random_state=seed).fit(rows[:, columns])
                lsa = svd.components_.astype(np.float32)
                dense = _unit_dense(np.asarray(rows[:, columns] @ lsa.T))
        return cls(HASHED, tuple(ids), rows, dense, idf, lsa, columns)

    @classmethod
    def embedded(cls, kind: str, ids: Sequence[str], vectors: npt.ArrayLike) -> Day:
        """A space of embeddings: one vector per paper (`kind` names the model)."""
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(ids):
            raise ValueError("one vector per paper")
        rows = _unit_dense(matrix)
        return cls(kind, tuple(ids), rows, rows)

    @property
    def width(self) -> int:
        """How many numbers a kept row has in this space."""
        return FEATURES if self.kind == HASHED else int(self.sparse.shape[1])

    def weigh(self, kept: Matrix) -> tuple[Matrix, Matrix]:
        """Rows kept by a model (raw counts, or embeddings) in today's space: (sparse, dense)
        views, unit rows (an all-zero row stays zero)."""
        if self.kind != HASHED:
            dense = kept.toarray() if sp.issparse(kept) else kept
            rows = _unit_dense(np.asarray(dense, dtype=np.float32))
            return rows, rows
        assert self.idf is not None
        rows = sp.csr_matrix(kept, dtype=np.float32, copy=True)
        rows.data *= self.idf[rows.indices]
        rows = _unit(rows)
        return rows, self.densify(rows)

    def densify(self, rows: Matrix) -> Matrix:
        """Unit sparse rows of this space in its dense view (the rows themselves for a
        small day without LSA, or for embeddings)."""
        if self.kind != HASHED or self.lsa is None or self.lsa_columns is None:
            return rows
        return _unit_dense(np.asarray(sp.csr_matrix(rows)[:, self.lsa_columns] @ self.lsa.T))

    @property
    def view(self) -> Matrix:
        """The day's papers in the dense view (the sparse rows for a small day)."""
        return self.dense if self.dense is not None else self.sparse


def similarity(day_rows: Matrix, rows: Matrix) -> Floats:
    """Cosines of unit rows: one row per day paper, one column per given row."""
    if rows.shape[0] == 0:
        return np.zeros((day_rows.shape[0], 0), dtype=np.float32)
    product = day_rows @ (rows.T if sp.issparse(rows) else np.ascontiguousarray(rows.T))
    if sp.issparse(product):
        product = product.toarray()
    return np.asarray(product, dtype=np.float32)


def _unit(rows: sp.spmatrix) -> sp.csr_matrix:
    """Rows scaled to unit length (an all-zero row stays zero)."""
    rows = sp.csr_matrix(rows, dtype=np.float32)
    squares = np.bincount(
        np.repeat(np.arange(rows.shape[0]), np.diff(rows.indptr)),
        weights=rows.data.astype(np.float64) ** 2,
        minlength=rows.shape[0],
    )
    norms = np.sqrt(squares)
    norms[norms == 0] = 1.0
    rows.data /= np.repeat(norms, np.diff(rows.indptr)).astype(np.float32)
    return rows


def _unit_dense(rows: npt.NDArray[np.float32]) -> Floats:
    rows = np.nan_to_num(np.asarray(rows, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    if rows.ndim != 2 or rows.shape[0] == 0:
        return rows.reshape(-1, rows.shape[-1] if rows.ndim else 0)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (rows / norms).astype(np.float32)
