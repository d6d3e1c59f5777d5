"""The manager's listening sockets: a cap on open connections, a TLS handshake deadline and
an idle timeout, so that connections nobody uses cannot pile up (webhook, metrics)."""

from __future__ import annotations

import asyncio
import socket
import ssl

import pytest
from aiohttp import web

from trainop.cluster.serving import server
from trainop.cluster.serving.listener import (
    EVICTED,
    REFUSED,
    TOO_SLOW,
    ConnectionLimits,
    Listener,
    serve,
)

LIMITS = ConnectionLimits(max_connections=3, handshake_timeout=0.5, idle_timeout=0.5)


def tls_client() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


async def started(tls: bool, limits: ConnectionLimits = LIMITS) -> Listener:
    app = web.Application()

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    async def echo(request: web.Request) -> web.Response:
        return web.Response(text=f"read {len(await request.read())}")
    app.router.add_get("/", hello)
    app.router.add_post("/", echo)
    ctx = server.self_signed_context() if tls else None
    return await serve("test", app, "127.0.0.1", 0, ctx, limits)


async def connect(port: int, source: str = "127.0.0.1", tls: bool = False
                  ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0),
                                         ssl=tls_client() if tls else None)


async def closed_by_server(reader: asyncio.StreamReader, within: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), within) == b""
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


async def get(port: int, tls: bool) -> bytes:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=tls_client() if tls else None)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    body = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return body


def test_connections_beyond_the_cap_are_closed_at_once_and_served_again_after() -> None:
    async def scenario() -> None:
        listener = await started(tls=True)
        refused = REFUSED.labels("test")._value.get()
        # idle TCP connections that never start TLS: each counts until its deadline
        idle = [await asyncio.open_connection("127.0.0.1", listener.port) for _ in range(3)]
        await asyncio.sleep(0.1)
        assert listener.open == 3
        reader, _ = await asyncio.open_connection("127.0.0.1", listener.port)
        assert await closed_by_server(reader, 0.3)  # the fourth: refused at once
        assert REFUSED.labels("test")._value.get() == refused + 1
        # the handshake deadline frees every slot, and the server serves again
        assert all([await closed_by_server(r, 3) for r, _ in idle])
        await asyncio.sleep(0.1)
        assert listener.open == 0
        assert (await get(listener.port, tls=True)).endswith(b"hello")
        await listener.cleanup()
    asyncio.run(scenario())


def test_an_idle_tls_connection_is_closed_after_the_idle_timeout() -> None:
    async def scenario() -> None:
        listener = await started(tls=True)
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port,
                                                       ssl=tls_client())
        assert listener.open == 1
        assert await closed_by_server(reader, 3)  # no request within the idle timeout
        writer.close()
        await asyncio.sleep(0.1)
        assert listener.open == 0
        await listener.cleanup()
    asyncio.run(scenario())


def test_plain_http_is_served_within_the_same_limits() -> None:
    async def scenario() -> None:
        listener = await started(tls=False)
        assert (await get(listener.port, tls=False)).endswith(b"hello")
        assert (await get(listener.port, tls=False)).endswith(b"hello")
        await asyncio.sleep(0.1)
        assert listener.open == 0
        port = listener.port
        await listener.cleanup()
        with socket.socket() as s:  # closed: nothing listens any more
            assert s.connect_ex(("127.0.0.1", port)) != 0
    asyncio.run(scenario())


def test_one_address_holds_only_its_share_of_the_connections() -> None:
    async def scenario() -> None:
        listener = await started(tls=False, limits=ConnectionLimits(
            max_connections=4, per_source=2, idle_timeout=5))
        mine = [await connect(listener.port) for _ in range(2)]
        await asyncio.sleep(0.1)
        reader, _ = await connect(listener.port)
        assert await closed_by_server(reader, 0.3)  # a third from the same address
        # another address (the API server's, the kubelet's) is served meanwhile
        other, writer = await connect(listener.port, "127.0.0.2")
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (await asyncio.wait_for(other.read(), 5)).endswith(b"hello")
        assert listener.by_source == {"127.0.0.1": 2}
        for _, w in mine:
            w.close()
        await listener.cleanup()
    asyncio.run(scenario())


@pytest.mark.parametrize("tls", [False, True])
def test_addresses_that_fill_every_slot_make_room_for_one_that_holds_fewer(tls: bool) -> None:
    """Four addresses hold every connection (each within its share); a fifth, the API
    server's, is served all the same: the address holding the most gives up its oldest
    idle connection. One that already holds its fair share gets no more."""
    async def scenario() -> None:
        listener = await started(tls=tls, limits=ConnectionLimits(
            max_connections=8, per_source=4, idle_timeout=5, handshake_timeout=5))
        evicted = EVICTED.labels("test")._value.get()
        flood = {f"127.0.0.{i}": [await connect(listener.port, f"127.0.0.{i}")
                                  for _ in range(2)] for i in range(2, 6)}
        await asyncio.sleep(0.1)
        assert listener.open == 8
        reader, writer = await connect(listener.port, "127.0.0.9", tls=tls)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (await asyncio.wait_for(reader.read(), 5)).endswith(b"hello")
        assert EVICTED.labels("test")._value.get() == evicted + 1
        closed = [await closed_by_server(r, 0.3) for conns in flood.values() for r, _ in conns]
        assert closed.count(True) == 1  # one of the flood's, the oldest of the first address
        assert closed[0]
        # every slot taken again, shares even: an address holding as many as any other
        # gets no more (within its per-address cap of 4 all the same)
        _, last = await connect(listener.port, "127.0.0.9")
        await asyncio.sleep(0.1)
        assert listener.open == 8
        again, _ = await connect(listener.port, "127.0.0.3")
        assert await closed_by_server(again, 0.3)
        last.close()
        for conns in flood.values():
            for _, w in conns:
                w.close()
        await listener.cleanup()
    asyncio.run(scenario())


@pytest.mark.parametrize("tls", [False, True])
@pytest.mark.parametrize("stall", ["headers", "body"])
def test_a_request_that_trickles_in_is_closed_at_its_deadline(tls: bool, stall: str) -> None:
    # a byte every 0.1 s keeps any idle timeout from firing; the request deadline does not
    async def scenario() -> None:
        listener = await started(tls=tls, limits=ConnectionLimits(
            request_timeout=0.8, idle_timeout=30))
        slow = await listener_too_slow()
        reader, writer = await connect(listener.port, tls=tls)
        head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
        writer.write(head if stall == "headers" else head + b"\r\n")
        started_at = asyncio.get_running_loop().time()
        closed = False
        for _ in range(40):
            writer.write(b"X-a: b\r\n" if stall == "headers" else b"x")
            if await closed_by_server(reader, 0.1):
                closed = True
                break
        assert closed and asyncio.get_running_loop().time() - started_at < 2
        assert await listener_too_slow() == slow + 1
        await asyncio.sleep(0.1)
        assert listener.open == 0
        # a request that arrives whole in time is answered, again and again
        reader, writer = await connect(listener.port, tls=tls)
        for _ in range(3):
            writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
            assert (await asyncio.wait_for(reader.readuntil(b"read 3"), 5)).endswith(b"read 3")
            await asyncio.sleep(0.5)  # idle between requests: no deadline runs
        writer.close()
        await listener.cleanup()
    asyncio.run(scenario())


async def listener_too_slow() -> float:
    return float(TOO_SLOW.labels("test")._value.get())


def test_stalled_bodies_hold_no_more_than_the_budget() -> None:
    async def scenario() -> None:
        limits = ConnectionLimits(request_timeout=1, max_body=100_000,
                                  body_budget=300_000, body_budget_per_source=200_000)
        listener = await started(tls=False, limits=limits)
        stalled = []
        for _ in range(10):  # each announces 100 kB, sends 99 kB and stops
            reader, writer = await connect(listener.port)
            writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" +
                         b"x" * 99_000)
            stalled.append((reader, writer))
        await asyncio.sleep(0.3)
        assert listener.bodies.taken == 200_000  # two being read; the others wait, unread
        # another address has the rest of the budget
        reader, writer = await connect(listener.port, "127.0.0.2")
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" +
                     b"y" * 100_000)
        assert (await asyncio.wait_for(reader.readuntil(b"read 100000"), 5)).endswith(
            b"read 100000")
        # too big for any budget: refused before a byte of it is read
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100001\r\n\r\n")
        assert b" 413 " in await asyncio.wait_for(reader.readuntil(b"\r\n"), 5)
        writer.close()
        # the deadline ends the stalled ones and frees their share
        assert all([await closed_by_server(r, 3) for r, _ in stalled])
        await asyncio.sleep(0.1)
        assert listener.bodies.taken == 0 and listener.bodies.by_source == {}
        assert listener.open == 0
        await listener.cleanup()
    asyncio.run(scenario())


def test_a_body_holds_its_share_until_answered_and_a_hang_up_cancels_its_request() -> None:
    waiting, cancelled = asyncio.Event(), asyncio.Event()

    async def scenario() -> None:
        limits = ConnectionLimits(max_body=100_000, body_budget=300_000,
                                  body_budget_per_source=200_000)
        app = web.Application()

        async def stuck(request: web.Request) -> web.Response:
            await request.read()
            waiting.set()
            try:
                await asyncio.Event().wait()  # a judge that never comes
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return web.Response(text="never")
        app.router.add_post("/", stuck)
        listener = await serve("test", app, "127.0.0.1", 0, None, limits)
        _, writer = await connect(listener.port)
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" +
                     b"x" * 100_000)
        await asyncio.wait_for(waiting.wait(), 5)
        # read whole, but in memory until answered: still counted
        assert listener.bodies.taken == 100_000
        # and its connection is not an idle one to evict first
        assert [g.handling is not None for g in listener.gates.values()] == [True]
        writer.close()  # the client hangs up
        await asyncio.wait_for(cancelled.wait(), 5)
        await asyncio.sleep(0.1)
        assert listener.bodies.taken == 0 and listener.open == 0
        await listener.cleanup()
    asyncio.run(scenario())


def test_an_answer_left_unread_is_dropped_at_the_deadline_and_frees_its_share() -> None:
    async def scenario() -> None:
        limits = ConnectionLimits(request_timeout=1, max_body=100_000, body_budget=300_000,
                                  body_budget_per_source=200_000)
        app = web.Application()

        async def large(request: web.Request) -> web.Response:
            await request.read()
            return web.Response(body=b"z" * 64 * 2**20)  # past every socket buffer
        app.router.add_post("/", large)
        listener = await serve("test", app, "127.0.0.1", 0, None, limits)
        slow = await listener_too_slow()
        _, writer = await connect(listener.port)
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" +
                     b"x" * 100_000)
        await asyncio.sleep(0.5)
        # the answer is being written: the request's share is held until it is
        assert listener.bodies.taken == 100_000
        # never read: the connection goes at the deadline, and the share with it
        await asyncio.sleep(2)
        assert listener.bodies.taken == 0 and listener.open == 0
        assert await listener_too_slow() - slow == 1
        writer.close()
        await listener.cleanup()
    asyncio.run(scenario())


def test_the_api_servers_idle_connections_are_never_closed_under_it() -> None:
    # Go's http.Transport (the API server's webhook client) keeps an idle connection 90 s
    # and may send on it until then: closed first by us, a call fails with EOF
    assert ConnectionLimits().idle_timeout > 90
