"""bot.similar.endpoint against the /v1/embeddings stand-in (tests/support/embeddings.py): the
real protocol through the official client, batching, retries on 429/503 honouring
Retry-After, refusals, slowness and the overall deadline, and untrusted answers (wrong
count, dimension, types, NaN, huge) failing the call with a clear reason, never a crash."""

from __future__ import annotations

import asyncio
import math
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.embeddings import DIMENSION, EmbeddingsStandIn, Fault

from bot.pipeline.wiring import embeddings_endpoint, load_config
from bot.similar.endpoint import (
    EmbeddingsClient,
    EmbeddingsFailure,
    FastembedEmbedder,
    check_vectors,
)


@pytest.fixture
def standin() -> Iterator[EmbeddingsStandIn]:
    with EmbeddingsStandIn() as running:
        yield running


def embed(standin: EmbeddingsStandIn, texts: list[str], *, deadline: float = 10, **kw: Any) -> Any:
    async def go() -> Any:
        options = {"timeout": 5.0, "batch_size": 3, "max_retries": 2, **kw}
        async with EmbeddingsClient(base_url=standin.base_url, model="m", **options) as client:
            return await client.embed(texts, deadline=deadline)

    return asyncio.run(go())


def test_texts_are_embedded_in_batches_in_order(standin: EmbeddingsStandIn) -> None:
    texts = [f"paper {n} about robots" for n in range(7)]
    vectors = embed(standin, texts)
    assert vectors.shape == (7, DIMENSION) and vectors.dtype == np.float32
    assert [len(r["input"]) for r in standin.requests] == [3, 3, 1]
    assert all(r["model"] == "m" and r["encoding_format"] == "float" for r in standin.requests)
    again = embed(standin, texts[::-1])
    assert np.allclose(again[::-1], vectors)


def test_rate_limits_are_retried_after_what_the_server_says(standin: EmbeddingsStandIn) -> None:
    standin.script += [Fault(status=429, retry_after="1"), Fault(status=503, retry_after="0")]
    started = time.monotonic()
    vectors = embed(standin, ["a text"])
    assert vectors.shape == (1, DIMENSION)
    assert len(standin.requests) == 3
    assert time.monotonic() - started >= 0.9  # waited the second the 429 asked for


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (Fault(status=401), "bad key"),
        (Fault(status=404, body={"error": {"message": "model 'm' not found"}}), "no such model"),
        (Fault(status=400, body=b"<html>no</html>"), "bad request"),
        (Fault(body=b"not json at all"), "bad answer"),
        (Fault(body={"data": "nope"}), "bad answer"),
        (Fault(body={"object": "list", "data": []}), "bad answer"),
    ],
)
def test_refusals_and_bad_answers_fail_with_a_reason(
    standin: EmbeddingsStandIn, fault: Fault, reason: str
) -> None:
    standin.script.append(fault)
    with pytest.raises(EmbeddingsFailure) as failure:
        embed(standin, ["a text"], max_retries=0)
    assert failure.value.reason == reason, failure.value


def test_persistent_server_errors_give_up_after_the_retries(standin: EmbeddingsStandIn) -> None:
    standin.script += [Fault(status=500, retry_after="0")] * 3
    with pytest.raises(EmbeddingsFailure) as failure:
        embed(standin, ["a"], max_retries=2)
    assert failure.value.reason == "server error" and len(standin.requests) == 3


def test_a_slow_endpoint_meets_the_deadline(standin: EmbeddingsStandIn) -> None:
    standin.script += [Fault(delay=0.2), Fault(delay=3)]
    started = time.monotonic()
    with pytest.raises(EmbeddingsFailure) as failure:
        embed(standin, ["a", "b", "c", "d"], deadline=1.0, max_retries=0)
    assert failure.value.reason == "timeout"
    assert time.monotonic() - started < 2.5


def test_an_unreachable_endpoint_says_so() -> None:
    async def go() -> None:
        async with EmbeddingsClient(
            base_url="http://127.0.0.1:9/v1", model="m", max_retries=0
        ) as c:
            await c.embed(["a"], deadline=5)

    with pytest.raises(EmbeddingsFailure) as failure:
        asyncio.run(go())
    assert failure.value.reason == "unreachable"


def test_an_answer_past_its_size_cap_is_not_read(standin: EmbeddingsStandIn) -> None:
    from bot.config import parse_config
    from bot.pipeline.wiring import embeddings_endpoint

    section = {"base_url": standin.base_url, "model": "m", "batch_size": 3, "max_retries": 1}
    endpoint = embeddings_endpoint(parse_config({"version": 1, "embeddings": section}))
    assert endpoint is not None
    standin.script.append(Fault(flood=64 * 1024 * 1024))

    async def go() -> Any:
        client = endpoint.open()
        assert isinstance(client, EmbeddingsClient)
        async with client:
            return await client.embed(["a", "b", "c"], deadline=10)

    with pytest.raises(EmbeddingsFailure) as failure:
        asyncio.run(go())
    assert (failure.value.reason, len(standin.requests)) == ("too large", 1), failure.value
    assert standin.sent[0] < 16 * 1024 * 1024  # reading stopped at the cap


def test_a_second_batch_of_another_dimension_is_refused(standin: EmbeddingsStandIn) -> None:
    short = {"data": [{"index": 0, "embedding": [1.0, 2.0]}]}
    standin.script += [Fault(), Fault(body=short)]
    with pytest.raises(EmbeddingsFailure, match="dimension"):
        embed(standin, ["a", "b", "c", "d"], max_retries=0)


def test_fastembed_not_installed_says_how_to_get_it() -> None:
    try:
        import fastembed  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        with pytest.raises(EmbeddingsFailure, match=r"paperbell\[fastembed\]"):
            FastembedEmbedder("BAAI/bge-small-en-v1.5")


FASTEMBED_CONFIG = """version = 1
[database]
url = "sqlite:///../data/pb.sqlite"
[embeddings]
provider = "fastembed"
model = "BAAI/bge-small-en-v1.5"
"""


def test_fastembed_keeps_its_model_in_a_lasting_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fastembed's own default is under the temp folder, which the systemd unit's
    # PrivateTmp=yes empties at each start: the model would be downloaded at every restart.
    config = tmp_path / "etc" / "config.toml"
    config.parent.mkdir()
    config.write_text(FASTEMBED_CONFIG)
    endpoint = embeddings_endpoint(load_config(config, environ={}))
    assert endpoint is not None
    beside_the_database = tmp_path.resolve() / "data" / "fastembed"
    # What paperbell hands fastembed, through a stand-in that records it (no download).
    made: list[dict[str, Any]] = []

    class TextEmbedding:
        def __init__(self, **settings: Any) -> None:
            made.append(settings)

    monkeypatch.setitem(
        sys.modules, "fastembed", types.SimpleNamespace(TextEmbedding=TextEmbedding)
    )
    embedder = endpoint.open()
    assert made == [{"model_name": "BAAI/bge-small-en-v1.5", "cache_dir": str(beside_the_database)}]
    assert isinstance(embedder, FastembedEmbedder)
    assert embedder.cache_dir == beside_the_database
    assert endpoint.cache_dir == beside_the_database
    # [embeddings] cache_dir: a relative path is taken from the config file's folder.
    config.write_text(FASTEMBED_CONFIG + 'cache_dir = "models"\n')
    endpoint = embeddings_endpoint(load_config(config, environ={}))
    assert endpoint is not None and endpoint.cache_dir == tmp_path.resolve() / "etc" / "models"


POSTGRESQL_FASTEMBED = FASTEMBED_CONFIG.replace(
    "sqlite:///../data/pb.sqlite", "postgresql://paperbell@db.example.org/papers"
)


@pytest.mark.parametrize(
    ("environ", "folder"),
    [
        ({"HOME": "{tmp}/ada"}, "{tmp}/ada/.cache/paperbell/fastembed"),
        ({"HOME": "{tmp}/ada", "XDG_CACHE_HOME": "{tmp}/cache"}, "{tmp}/cache/paperbell/fastembed"),
        # The XDG spec: a relative XDG_CACHE_HOME is no folder, and is ignored.
        ({"HOME": "{tmp}/ada", "XDG_CACHE_HOME": "cache"}, "{tmp}/ada/.cache/paperbell/fastembed"),
        # The systemd unit's CacheDirectory=paperbell: made for the service, kept across starts.
        (
            {"HOME": "{tmp}/ada", "CACHE_DIRECTORY": "/var/cache/paperbell"},
            "/var/cache/paperbell/fastembed",
        ),
        # fastembed's own variable, when it is set, as before.
        ({"HOME": "{tmp}/ada", "FASTEMBED_CACHE_PATH": "/srv/models"}, "/srv/models"),
    ],
)
def test_fastembed_on_postgresql_keeps_its_model_in_the_users_cache(
    tmp_path: Path, environ: dict[str, str], folder: str
) -> None:
    # With no SQLite file to keep it beside, fastembed chose a folder under the temp folder,
    # which a systemd service's private /tmp empties at each start.
    (tmp_path / "ada").mkdir()
    config = tmp_path / "config.toml"
    config.write_text(POSTGRESQL_FASTEMBED)
    environ = {name: value.format(tmp=tmp_path) for name, value in environ.items()}
    endpoint = embeddings_endpoint(load_config(config, environ=environ))
    assert endpoint is not None and endpoint.cache_dir == Path(folder.format(tmp=tmp_path))


def test_fastembed_keeps_its_own_folder_when_the_home_cannot_hold_one(tmp_path: Path) -> None:
    # A uid with no home of its own (HOME=/ for a uid a container does not know, a system
    # user made with no home) cannot make ~/.cache: fastembed's own folder is better than
    # none. Here the home is a file, which no user, root included, can make a folder in.
    (tmp_path / "home").write_text("not a folder")
    config = tmp_path / "config.toml"
    config.write_text(POSTGRESQL_FASTEMBED)
    endpoint = embeddings_endpoint(load_config(config, environ={"HOME": str(tmp_path / "home")}))
    assert endpoint is not None and endpoint.cache_dir is None


numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**40), 10**40),
    st.text(max_size=3),
    st.none(),
    st.booleans(),
)
items = st.one_of(
    st.fixed_dictionaries(
        {
            "index": st.one_of(st.integers(-2, 4), st.text(max_size=2), st.none()),
            "embedding": st.one_of(st.lists(numbers, max_size=6), st.text(max_size=5), st.none()),
        }
    ),
    st.none(),
    st.integers(),
    st.lists(st.floats(), max_size=3),
)
answers = st.one_of(
    st.fixed_dictionaries({"data": st.one_of(st.lists(items, max_size=5), st.text(max_size=5))}),
    st.none(),
    st.text(max_size=10),
    st.lists(items, max_size=3),
)


@settings(max_examples=400)
@given(answer=answers, count=st.integers(0, 4))
def test_any_answer_is_vectors_or_a_bad_answer(answer: object, count: int) -> None:
    try:
        vectors = check_vectors(answer, count)
    except EmbeddingsFailure as failure:
        assert failure.reason == "bad answer"
        return
    assert vectors.shape[0] == count
    assert all(math.isfinite(v) for v in vectors.ravel())
    assert vectors.dtype == np.float32


def test_huge_answers_are_refused_not_swallowed() -> None:
    long = {"data": [{"index": 0, "embedding": [0.5] * 10_000}]}
    with pytest.raises(EmbeddingsFailure):
        check_vectors(long, 1)
    with pytest.raises(EmbeddingsFailure, match="NaN"):
        check_vectors({"data": [{"index": 0, "embedding": [float("nan"), 1.0]}]}, 1)
