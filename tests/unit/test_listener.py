"""The manager's listening sockets: a cap on open connections, a TLS handshake deadline and
an idle timeout, so that connections nobody uses cannot pile up (webhook, metrics)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import tempfile
from pathlib import Path

from aiohttp import web

from trainop.cluster import server
from trainop.cluster.listener import REFUSED, ConnectionLimits, Listener, serve

LIMITS = ConnectionLimits(max_connections=3, handshake_timeout=0.5, idle_timeout=0.5)


def tls_client() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


async def started(tls: bool) -> Listener:
    app = web.Application()

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")
    app.router.add_get("/", hello)
    ctx = server.self_signed_context(Path(tempfile.mkdtemp())) if tls else None
    return await serve("test", app, "127.0.0.1", 0, ctx, LIMITS)


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
