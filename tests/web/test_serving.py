"""The web app's server (`bot.web.app.make_server`, as `paperbell run` and `serve` run it):
while it serves, what the process held when it started is left out of garbage collection,
so that a full collection never walks the modules and the wired parts with requests
waiting; once it stops, the collector sees everything again. On the real server (uvicorn on
loopback)."""

from __future__ import annotations

import asyncio
import gc
import socket

import httpx

from bot.web.app import create_app, make_server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_what_the_process_held_at_the_start_is_left_out_of_collections_while_it_serves() -> None:
    async def serve() -> tuple[int, int]:
        port = free_port()
        server = make_server(create_app(), host="127.0.0.1", port=port)
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                assert (await client.get("/nothing")).status_code == 404  # it serves
            serving = gc.get_freeze_count()
        finally:
            server.should_exit = True
            await task
        return serving, gc.get_freeze_count()

    serving, after = asyncio.run(serve())
    assert serving > 10_000  # the modules at least: far more than a request makes
    assert after == 0
