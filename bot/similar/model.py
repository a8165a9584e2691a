"""A subscriber's ranking model: the papers they liked and disliked (as rows of a space) and a
linear model fitted on them, in bytes the store can keep (`to_bytes` / `from_bytes`).

Fitted (`fit`) when the subscriber's feedback changes (`bot.similar.text.feedback_hash`):
positives are the liked papers, negatives the disliked ones (weighted up) and a sample of
the day's papers; scikit-learn's logistic regression (class-balanced, C = `C`), measured
against LinearSVC and SGD in bench/similar.py. Only the features the training rows use can
carry weight, so the weights are kept sparse: feature indices and values.

The bytes: b"PBRM", a format version byte, a 4-byte length and a JSON header (kind, keys,
titles, the arrays' shapes), then the arrays (little-endian float32 / int32). No pickle:
reading stored bytes runs no code, and bytes that do not read as a model (cut, corrupted,
another version, non-finite numbers) raise `ModelError` (the caller refits).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from bot.similar.space import HASHED, Day, Matrix

__all__ = ["MAGIC", "Model", "ModelError", "fit"]

MAGIC = b"PBRM"
VERSION = 1
C = 10.0  # inverse regularisation (bench/similar.py: 1-100 alike; 10 steadiest)
NEGATIVES = 200  # papers of the day sampled as negatives
DISLIKE_WEIGHT = 3.0  # a disliked paper counts as this many sampled negatives
MAX_KEPT = 5000  # liked or disliked papers a model keeps (the most recent)
MAX_HEADER = 4 << 20
MAX_WIDTH = 1 << 20


class ModelError(ValueError):
    """Stored bytes that are no model this version reads."""


@dataclass(frozen=True)
class Model:
    """What one subscriber's ranking needs: the kind of space, the liked and disliked papers
    as kept rows (raw counts or embeddings) with their keys and titles, and the linear
    model's weights (sparse: `indices`, `weights`; empty without likes) and intercept."""

    kind: str
    width: int
    liked_keys: tuple[str, ...]
    liked_titles: tuple[str, ...]
    liked: sp.csr_matrix
    disliked_keys: tuple[str, ...]
    disliked: sp.csr_matrix
    indices: npt.NDArray[np.int32]
    weights: npt.NDArray[np.float32]
    intercept: float = 0.0

    def to_bytes(self) -> bytes:
        arrays = {
            "liked": self.liked,
            "disliked": self.disliked,
        }
        header: dict[str, object] = {
            "kind": self.kind,
            "width": self.width,
            "liked_keys": list(self.liked_keys),
            "liked_titles": list(self.liked_titles),
            "disliked_keys": list(self.disliked_keys),
            "intercept": float(self.intercept),
            "weights": len(self.weights),
        }
        parts: list[bytes] = []
        for name, matrix in arrays.items():
            matrix = sp.csr_matrix(matrix, dtype=np.float32)
            header[name] = [int(matrix.shape[0]), len(matrix.data)]
            parts += [
                matrix.indptr.astype("<i4").tobytes(),
                matrix.indices.astype("<i4").tobytes(),
                matrix.data.astype("<f4").tobytes(),
            ]
        parts += [self.indices.astype("<i4").tobytes(), self.weights.astype("<f4").tobytes()]
        head = json.dumps(header, ensure_ascii=True).encode("ascii")
        return b"".join([MAGIC, bytes([VERSION]), struct.pack("<I", len(head)), head, *parts])

    @classmethod
    def from_bytes(cls, data: bytes) -> Model:
        """The model `to_bytes` wrote; ModelError for anything else."""
        try:
            return _read(memoryview(data))
        except ModelError:
            raise
        except (ValueError, TypeError, KeyError, struct.error, UnicodeDecodeError) as exc:
            raise ModelError(f"not a ranking model: {exc}") from None


class _Reader:
    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.at = 0

    def take(self, size: int) -> memoryview:
        if size < 0 or self.at + size > len(self.data):
            raise ModelError("not a ranking model: cut short")
        piece = self.data[self.at : self.at + size]
        self.at += size
        return piece

    def array(self, count: int, dtype: str) -> npt.NDArray[np.generic]:
        return np.frombuffer(self.take(count * 4), dtype=dtype).copy()


def _read(data: memoryview) -> Model:
    reader = _Reader(data)
    if bytes(reader.take(4)) != MAGIC:
        raise ModelError("not a ranking model (no PBRM mark)")
    version = reader.take(1)[0]
    if version != VERSION:
        raise ModelError(f"a ranking model of format {version}, this version reads {VERSION}")
    (length,) = struct.unpack("<I", reader.take(4))
    if length > MAX_HEADER:
        raise ModelError("not a ranking model: header too long")
    header = json.loads(bytes(reader.take(length)).decode("ascii"))
    if not isinstance(header, dict):
        raise ModelError("not a ranking model: header is no object")
    kind, width = header["kind"], header["width"]
    if not isinstance(kind, str) or not isinstance(width, int) or not 0 < width <= MAX_WIDTH:
        raise ModelError("not a ranking model: bad kind or width")
    liked_keys = _strings(header["liked_keys"])
    liked_titles = _strings(header["liked_titles"])
    disliked_keys = _strings(header["disliked_keys"])
    matrices = []
    for name, keys in (("liked", liked_keys), ("disliked", disliked_keys)):
        rows, nnz = header[name]
        if not isinstance(rows, int) or not isinstance(nnz, int) or rows != len(keys):
            raise ModelError(f"not a ranking model: bad {name} shape")
        if nnz < 0 or nnz > rows * width:
            raise ModelError(f"not a ranking model: bad {name} size")
        indptr = reader.array(rows + 1, "<i4")
        indices = reader.array(nnz, "<i4")
        values = reader.array(nnz, "<f4")
        if indptr[0] != 0 or indptr[-1] != nnz or np.any(np.diff(indptr) < 0):
            raise ModelError(f"not a ranking model: bad {name} rows")
        if nnz and (indices.min() < 0 or indices.max() >= width):
            raise ModelError(f"not a ranking model: bad {name} columns")
        _finite(values, name)
        matrices.append(sp.csr_matrix((values, indices, indptr), shape=(rows, width)))
    count = header["weights"]
    if not isinstance(count, int) or not 0 <= count <= width:
        raise ModelError("not a ranking model: bad weights")
    columns = reader.array(count, "<i4").astype(np.int32)
    weights = reader.array(count, "<f4").astype(np.float32)
    if count and (columns.min() < 0 or columns.max() >= width):
        raise ModelError("not a ranking model: bad weight columns")
    _finite(weights, "weights")
    intercept = header["intercept"]
    if not isinstance(intercept, int | float) or not np.isfinite(intercept):
        raise ModelError("not a ranking model: bad intercept")
    if reader.at != len(data):
        raise ModelError("not a ranking model: bytes left over")
    if len(liked_titles) != len(liked_keys):
        raise ModelError("not a ranking model: one title per liked paper")
    return Model(
        kind=kind,
        width=width,
        liked_keys=liked_keys,
        liked_titles=liked_titles,
        liked=matrices[0],
        disliked_keys=disliked_keys,
        disliked=matrices[1],
        indices=columns,
        weights=weights,
        intercept=float(intercept),
    )


def _strings(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ModelError("not a ranking model: a list of texts expected")
    return tuple(value)


def _finite(values: npt.NDArray[np.generic], name: str) -> None:
    if not np.all(np.isfinite(values)):
        raise ModelError(f"not a ranking model: {name} not finite")


def fit(
    day: Day,
    *,
    liked: Matrix,
    liked_keys: Sequence[str],
    liked_titles: Sequence[str],
    disliked: Matrix,
    disliked_keys: Sequence[str],
    seed: int = 0,
    negatives: int = NEGATIVES,
    c: float = C,
) -> Model:
    """A subscriber's model over `day` (its papers are the sampled negatives): `liked` and
    `disliked` are kept rows (raw counts from `raw_counts`, or embeddings), one per key."""
    liked = sp.csr_matrix(liked, dtype=np.float32)[-MAX_KEPT:]
    disliked = sp.csr_matrix(disliked, dtype=np.float32)[-MAX_KEPT:]
    liked_keys, liked_titles = tuple(liked_keys)[-MAX_KEPT:], tuple(liked_titles)[-MAX_KEPT:]
    disliked_keys = tuple(disliked_keys)[-MAX_KEPT:]
    if liked.shape[0] != len(liked_keys) or disliked.shape[0] != len(disliked_keys):
        raise ValueError("one kept row per key")
    indices = np.zeros(0, dtype=np.int32)
    weights = np.zeros(0, dtype=np.float32)
    intercept = 0.0
    if liked.shape[0] and len(day.ids):
        indices, weights, intercept = _classifier(
            day, liked, disliked, set(liked_keys) | set(disliked_keys), seed, negatives, c
        )
    return Model(
        kind=day.kind,
        width=day.width,
        liked_keys=liked_keys,
        liked_titles=liked_titles,
        liked=liked,
        disliked_keys=disliked_keys,
        disliked=disliked,
        indices=indices,
        weights=weights,
        intercept=intercept,
    )


def _classifier(
    day: Day,
    liked: sp.csr_matrix,
    disliked: sp.csr_matrix,
    known: set[str],
    seed: int,
    negatives: int,
    c: float,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32], float]:
    rng = np.random.default_rng(seed)
    others = np.array([n for n, key in enumerate(day.ids) if key not in known], dtype=np.int64)
    sample = rng.choice(others, min(negatives, len(others)), replace=False)
    positive, _ = day.weigh(liked)
    negative, _ = day.weigh(disliked)
    day_rows = day.sparse[np.sort(sample)]
    parts = [positive, negative, day_rows]
    if day.kind == HASHED:
        rows = sp.vstack([sp.csr_matrix(p) for p in parts]).tocsr()
        columns = np.unique(rows.indices)
        rows = rows[:, columns]
    else:
        rows = np.vstack([np.asarray(p, dtype=np.float32) for p in parts])
        columns = np.arange(rows.shape[1])
    labels = np.r_[np.ones(positive.shape[0]), np.zeros(negative.shape[0] + day_rows.shape[0])]
    if labels.min() == labels.max() or len(columns) == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.float32), 0.0
    sample_weight = np.r_[
        np.ones(positive.shape[0]),
        np.full(negative.shape[0], DISLIKE_WEIGHT),
        np.ones(day_rows.shape[0]),
    ]
    # Imported here: scikit-learn takes a second to load, and most runs fit no model.
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=c, class_weight="balanced", max_iter=500)
    model.fit(rows, labels, sample_weight=sample_weight)
    coef = model.coef_.ravel().astype(np.float32)
    keep = coef != 0
    return (
        columns[keep].astype(np.int32),
        coef[keep],
        float(model.intercept_[0]),
    )
