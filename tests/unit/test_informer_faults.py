"""An informer facing answers the real API server never gives (a proxy's page, a broken
stream): the cache is kept, the informer retries, and it never stops. A small aiohttp
server stands in for the API server here because no real one can be made to answer so."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web

from trainop.api.resources import PODS
from trainop.cluster.reading.client import Client, MalformedResponse
from trainop.cluster.reading.config import ClusterConfig
from trainop.cluster.reading.informer import PAGE_BYTES, Informer

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "5"}}


class FlakyServer:
    """Lists answer from `lists` in turn (the last one repeats); watches from `watches`."""

    def __init__(self, lists: list[bytes], watches: list[bytes]):
        self.lists, self.watches = lists, watches
        self.calls: list[str] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        watching = request.query.get("watch") == "true"
        self.calls.append("watch" if watching else "list")
        source = self.watches if watching else self.lists
        body = source.pop(0) if len(source) > 1 else source[0]
        return web.Response(body=body, status=200, content_type="application/json")


@contextlib.asynccontextmanager
async def serving(fake: FlakyServer) -> AsyncIterator[Client]:
    """A client of `fake`, served on a loopback port for the block's duration."""
    app = web.Application()
    app.router.add_get("/api/v1/pods", fake.handle)
    async with client_of(app) as client:
        yield client


@contextlib.asynccontextmanager
async def client_of(app: web.Application) -> AsyncIterator[Client]:
    """A client of `app` (an API server's few answers a test needs), served on a loopback
    port for the block's duration."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = Client(ClusterConfig(server=f"http://127.0.0.1:{port}"))
    try:
        yield client
    finally:
        await client.close()
        await runner.cleanup()


async def run_against(fake: FlakyServer, seconds: float,
                      decode: Callable[[dict[str, Any]], Any] = lambda o: o,
                      key: Callable[[Any], str] = lambda o: o["metadata"]["name"]
                      ) -> Informer[Any]:
    """A pods informer (`decode`, `key`) after `seconds` against `fake`, never stopped."""
    async with serving(fake) as client:
        informer: Informer[Any] = Informer(client, PODS, decode, key, lambda o: None)
        task = asyncio.create_task(informer.run())
        await asyncio.sleep(seconds)
        assert not task.done(), "the informer stopped"
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return informer


def listing(*items: dict[str, Any]) -> bytes:
    return json.dumps({"metadata": {"resourceVersion": "9"}, "items": list(items)}).encode()


def test_a_non_json_list_keeps_the_cache_and_retries() -> None:
    fake = FlakyServer([listing(POD), b"<html>bad gateway</html>"],
                       [b'{"type": "ERROR", "object": {"code": 410}}\n'])
    informer = asyncio.run(run_against(fake, 2.5))
    assert list(informer.items) == ["p"]  # not emptied by an answer that is no list
    assert fake.calls.count("list") >= 3  # retried, with back-off


def test_a_broken_watch_stream_reconnects() -> None:
    deleted = json.dumps({"type": "DELETED", "object": POD}).encode() + b"\n"
    fake = FlakyServer([listing(POD)], [b"[1, 2]\n", b"not json\n", deleted])
    informer = asyncio.run(run_against(fake, 4))  # two back-offs: at most 0.75 + 1.5 s
    assert informer.items == {}  # the good event after the bad ones is applied
    assert fake.calls.count("watch") >= 3


def test_a_list_whose_items_are_not_objects_is_refused() -> None:
    fake = FlakyServer([b'{"metadata": {}, "items": [1]}', listing(POD)], [b""])
    informer = asyncio.run(run_against(fake, 1.5))
    assert list(informer.items) == ["p"]


def test_a_2xx_body_that_is_not_an_object_raises() -> None:
    fake = FlakyServer([b"[]"], [b""])

    async def get() -> None:
        async with serving(fake) as client:
            await client.get("/api/v1/pods")

    try:
        asyncio.run(get())
    except MalformedResponse as err:
        assert "200 with a body that is not a JSON object: b'[]'" in str(err)
    else:
        raise AssertionError("a list body was taken for an answer")


def test_list_pages_are_sized_by_bytes_not_only_by_count() -> None:
    # 30 objects of about 1 MiB (jobs may be 1.5 MiB): a page of 500 would be 500 MiB,
    # decoded five times that; each page after the first asks for what fits in PAGE_BYTES
    big = [{"metadata": {"name": f"j{i}", "namespace": "ns", "resourceVersion": "5"},
            "spec": {"blob": "x" * 2**20}} for i in range(30)]
    limits: list[int] = []

    class Paging(FlakyServer):
        async def handle(self, request: web.Request) -> web.StreamResponse:
            if request.query.get("watch") == "true":
                await asyncio.sleep(10)
                return web.Response(body=b"", content_type="application/json")
            limit, start = int(request.query["limit"]), int(request.query.get("continue") or 0)
            limits.append(limit)
            end = min(start + limit, len(big))
            meta = {"resourceVersion": "9", **({"continue": str(end)} if end < len(big) else {})}
            return web.json_response({"metadata": meta, "items": big[start:end]})

    async def scenario() -> Informer[Any]:
        async with serving(Paging([], [])) as client:
            informer: Informer[Any] = Informer(client, PODS, lambda o: o["metadata"]["name"],
                                               lambda name: name, lambda name: None,
                                               first_page=5)
            task = asyncio.create_task(informer.run())
            await asyncio.wait_for(informer.synced.wait(), 10)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return informer
    informer = asyncio.run(scenario())
    assert sorted(informer.items, key=lambda k: int(k[1:])) == [f"j{i}" for i in range(30)]
    assert limits[0] == 5 and set(limits[1:]) == {PAGE_BYTES // (2**20 + 100)}, limits
