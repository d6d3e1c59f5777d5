"""Listening sockets for the manager's servers (webhook, metrics, probes) that a stranger
cannot exhaust: a cap on open connections, a deadline for the TLS handshake and an idle
timeout, so that idle connections cost bounded memory whatever arrives.

aiohttp serves the HTTP; this module owns the sockets. A connection is accepted as plain
TCP (a few KiB) and counted; only then is TLS started on it, because asyncio's TLS layer
takes a 256 KiB buffer per connection from the moment it exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import Counter

log = logging.getLogger("trainop.listener")
REFUSED = Counter("trainop_connections_refused_total",
                  "Connections closed at once because a server had its maximum open",
                  ["server"])


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 256
    """Open connections at once, per server (about 300 KiB each with TLS)."""
    handshake_timeout: float = 10.0
    """Seconds a client has to complete the TLS handshake."""
    idle_timeout: float = 30.0
    """Seconds a connection may wait for a request, before the first and between them."""


class _Gate(asyncio.Protocol):
    """One connection: counted, upgraded to TLS, then handed to aiohttp's handler, whose
    protocol calls it forwards (asyncio keeps this object as the transport's protocol)."""

    def __init__(self, listener: Listener):
        self.listener = listener
        self.inner: asyncio.Protocol | None = None
        self.counted = False
        self.upgrade: asyncio.Task[None] | None = None
        self.early: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.upgrade is not None:
            return  # the TLS layer's own call once its handshake is done: _serve goes on
        assert isinstance(transport, asyncio.Transport)
        listener = self.listener
        if listener.open >= listener.limits.max_connections:
            REFUSED.labels(listener.name).inc()
            transport.abort()
            return
        listener.open += 1
        self.counted = True
        transport.pause_reading()  # the client's first bytes wait for the TLS layer
        self.upgrade = asyncio.get_running_loop().create_task(self._serve(transport))

    async def _serve(self, transport: asyncio.Transport) -> None:
        listener = self.listener
        if listener.ssl_context is not None:
            try:
                upgraded = await asyncio.get_running_loop().start_tls(
                    transport, self, listener.ssl_context, server_side=True,
                    ssl_handshake_timeout=listener.limits.handshake_timeout)
            except (OSError, ssl.SSLError, TimeoutError, ConnectionError):
                transport.abort()
                self._release()
                return
            if upgraded is None:  # the connection closed during the handshake
                self._release()
                return
            transport = upgraded
        else:
            transport.resume_reading()
        self.inner = listener.handler_factory()
        self.inner.connection_made(transport)
        # what the TLS layer delivered between its handshake and our turn to run
        for data in self.early:
            self.inner.data_received(data)
        self.early.clear()

    def _release(self) -> None:
        if self.counted:
            self.counted = False
            self.listener.open -= 1

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.data_received(data)
        else:
            self.early.append(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        if self.inner is not None:
            self.inner.connection_lost(exc)
        elif self.upgrade is not None:
            self.upgrade.cancel()


class Listener:
    """aiohttp's `runner` served at host:port through _Gate; `close()` ends both."""

    def __init__(self, name: str, runner: web.AppRunner, ssl_context: ssl.SSLContext | None,
                 limits: ConnectionLimits):
        self.name = name
        self.runner = runner
        self.ssl_context = ssl_context
        self.limits = limits
        self.open = 0
        self._server: asyncio.Server | None = None

    @property
    def handler_factory(self) -> Callable[[], Any]:
        assert self.runner.server is not None
        return self.runner.server

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self, host: str, port: int) -> Listener:
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _Gate(self), host, port, reuse_address=True)
        return self

    async def cleanup(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        await self.runner.cleanup()


async def serve(name: str, app: web.Application, host: str, port: int,
                ssl_context: ssl.SSLContext | None = None,
                limits: ConnectionLimits | None = None) -> Listener:
    """Serve `app` at host:port (TLS with `ssl_context`) within `limits`."""
    limits = limits or ConnectionLimits()
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=limits.idle_timeout)
    await runner.setup()
    return await Listener(name, runner, ssl_context, limits).start(host, port)
