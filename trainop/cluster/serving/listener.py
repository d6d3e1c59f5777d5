"""Listening sockets for the manager's servers (webhook, metrics, probes) that a stranger
cannot exhaust: a cap on open connections and a share of it per client address, a deadline
for the TLS handshake, one for each request to arrive whole (headers and body) and an idle
timeout, and a budget of request-body bytes held at once (from their reading until their
answer), so that what a stranger holds is bounded whatever arrives and the API server's and
the kubelet's connections get through. A request whose client hangs up is cancelled.

aiohttp serves the HTTP; this module owns the sockets. A connection is accepted as plain
TCP (a few KiB) and counted; only then is TLS started on it, because asyncio's TLS layer
takes a 256 KiB buffer per connection from the moment it exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import Counter

log = logging.getLogger("trainop.listener")
REFUSED = Counter("trainop_connections_refused_total",
                  "Connections closed at once because a server, or the client's address, "
                  "had its maximum open", ["server"])
EVICTED = Counter("trainop_connections_evicted_total",
                  "Connections closed to make room for an address holding fewer, when the "
                  "server had its maximum open", ["server"])
TOO_SLOW = Counter("trainop_requests_too_slow_total",
                   "Connections closed because a request did not arrive whole in time, or "
                   "its answer was left unread",
                   ["server"])
READ_SIZE = 64 * 2**10


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 256
    """Open connections at once, per server (about 300 KiB each with TLS)."""
    per_source: int = 64
    """Open connections one client address may hold of them. When all are taken, a new
    connection from an address holding fewer than the address holding the most closes
    that one's oldest idle connection: however many addresses a flood comes from, the API
    server's and the kubelet's connections get in."""
    handshake_timeout: float = 10.0
    """Seconds a client has to complete the TLS handshake."""
    request_timeout: float = 10.0
    """Seconds from a request's first byte until its headers and body are in (the API
    server gives a webhook at most 30 s in all, 10 s by default); and seconds a client may
    leave our answer unread once its buffers are full."""
    idle_timeout: float = 120.0
    """Seconds a connection may wait for a request, before the first and between them:
    longer than the API server's client keeps an idle connection (Go's http.Transport:
    90 s), so that it is always the client that closes one, never we while it may be
    sending on it (a webhook call that then fails with EOF)."""
    max_body: int = 4 * 2**20
    """Bytes a request body may have: an AdmissionReview holds a job and, for an update,
    its old version (the API server keeps an object under about 1.5 MiB)."""
    body_budget: int = 32 * 2**20
    """Bytes of request bodies held at once, per server, from their reading until their
    answer; a body waits for its share (within its request's deadline) before it is
    read."""
    body_budget_per_source: int = 8 * 2**20
    """Of those, bytes one client address may hold at once."""


class _Deadlines:
    """A connection's two deadlines, each `seconds` long, `expire` called when one passes:
    a request's, from its first byte until it is read whole, and a stalled answer's, while
    the client reads nothing of what we write (its buffers are full)."""

    def __init__(self, seconds: float, expire: Callable[[], None]):
        self.seconds = seconds
        self.expire = expire
        self.request: asyncio.TimerHandle | None = None
        self.stalled: asyncio.TimerHandle | None = None

    def request_started(self) -> None:
        if self.request is None:
            self.request = asyncio.get_running_loop().call_later(self.seconds,
                                                                 self._request_expired)

    def request_read(self) -> None:
        """The request under way is in whole: its deadline no longer runs."""
        if self.request is not None:
            self.request.cancel()
            self.request = None

    def _request_expired(self) -> None:
        self.request = None
        self.expire()

    def stall(self) -> None:
        if self.stalled is None:
            self.stalled = asyncio.get_running_loop().call_later(self.seconds, self.expire)

    def unstall(self) -> None:
        if self.stalled is not None:
            self.stalled.cancel()
            self.stalled = None


class _Gate(asyncio.Protocol):
    """One connection: counted, upgraded to TLS, then handed to aiohttp's handler, whose
    protocol calls it forwards (asyncio keeps this object as the transport's protocol)."""

    def __init__(self, listener: Listener):
        self.listener = listener
        self.inner: asyncio.Protocol | None = None
        self.counted = False
        self.upgrade: asyncio.Task[None] | None = None
        self.early: list[bytes] = []
        self.source = ""
        self.transport: asyncio.Transport | None = None
        self.handling: asyncio.Task[Any] | None = None
        """The task serving this connection's request, from its body until its answer."""
        self.deadlines = _Deadlines(listener.limits.request_timeout, self._too_slow)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.upgrade is not None:
            return  # the TLS layer's own call once its handshake is done: _serve goes on
        assert isinstance(transport, asyncio.Transport)
        listener = self.listener
        peer = transport.get_extra_info("peername")
        self.source = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if listener.by_source.get(self.source, 0) >= listener.limits.per_source or (
                listener.open >= listener.limits.max_connections
                and not listener.make_room(self.source)):
            REFUSED.labels(listener.name).inc()
            transport.abort()
            return
        listener.open += 1
        listener.by_source[self.source] = listener.by_source.get(self.source, 0) + 1
        listener.members.setdefault(self.source, {})[self] = None
        self.counted = True
        self.transport = transport
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
        self.transport = transport
        listener.gates[transport] = self
        self.inner = listener.handler_factory()
        self.inner.connection_made(transport)
        # what the TLS layer delivered between its handshake and our turn to run
        for data in self.early:
            self.inner.data_received(data)
        self.early.clear()

    def _release(self) -> None:
        self.deadlines.request_read()
        self.deadlines.unstall()
        if self.handling is not None:
            # a request whose client is gone: its body, its wait for a share of the budget
            # or for whatever its handler waits for, are for nobody
            self.handling.cancel()
            self.handling = None
        if self.counted:
            self.counted = False
            listener = self.listener
            listener.open -= 1
            listener.by_source[self.source] -= 1
            if not listener.by_source[self.source]:
                del listener.by_source[self.source]
            mine = listener.members.get(self.source, {})
            mine.pop(self, None)
            if not mine:
                listener.members.pop(self.source, None)
            if self.transport is not None:
                listener.gates.pop(self.transport, None)

    def _too_slow(self) -> None:
        TOO_SLOW.labels(self.listener.name).inc()
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.counted:
            # a request's first byte (or a body's rest, while the handler has not read it)
            self.deadlines.request_started()
        if self.inner is not None:
            self.inner.data_received(data)
        else:
            self.early.append(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        # a client that does not read its answer holds it in our buffers: it has as long
        # to read on as a request has to arrive
        self.deadlines.stall()
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.deadlines.unstall()
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
        self.by_source: dict[str, int] = {}
        self.members: dict[str, dict[_Gate, None]] = {}
        """Each address's open connections, oldest first."""
        self.gates: dict[asyncio.BaseTransport, _Gate] = {}
        self.bodies = _Budget(limits.body_budget, limits.body_budget_per_source)
        self._server: asyncio.Server | None = None

    def make_room(self, source: str) -> bool:
        """Close a connection of the address holding the most, where it holds at least two
        more than `source` (its oldest not in the middle of a request, else its oldest);
        False where none does (every address holds its fair share)."""
        mine = self.by_source.get(source, 0)
        biggest = max(self.by_source, key=self.by_source.__getitem__, default=None)
        if biggest is None or self.by_source[biggest] < mine + 2:
            return False
        theirs = list(self.members[biggest])
        victim = next((g for g in theirs if g.deadlines.request is None and g.handling is None),
                      theirs[0])
        EVICTED.labels(self.name).inc()
        transport = victim.transport
        victim._release()  # counted out now: its connection_lost comes on a later turn
        if transport is not None:
            transport.abort()
        return True

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


class _Budget:
    """Bytes that may be taken at once, in all and by one client address."""

    def __init__(self, total: int, per_source: int):
        self.total, self.per_source = total, per_source
        self.taken = 0
        self.by_source: dict[str, int] = {}
        self._freed = asyncio.Condition()

    def _fits(self, source: str, size: int) -> bool:
        return self.taken + size <= self.total and \
            self.by_source.get(source, 0) + size <= self.per_source

    @contextlib.asynccontextmanager
    async def share(self, source: str, size: int) -> AsyncIterator[None]:
        size = min(size, self.per_source, self.total)
        if not size:  # a request without a body
            yield
            return
        async with self._freed:
            await self._freed.wait_for(lambda: self._fits(source, size))
            self.taken += size
            self.by_source[source] = self.by_source.get(source, 0) + size
        try:
            yield
        finally:
            async with self._freed:
                self.taken -= size
                self.by_source[source] -= size
                if not self.by_source[source]:
                    del self.by_source[source]
                self._freed.notify_all()


def _read_whole(listener: Listener) -> Any:
    """Middleware: every request is read whole (headers, then the body within the byte
    budget) before its handler runs, all within the request deadline; its share of the
    budget is held until it is answered (the body lives until then), and the request is
    cancelled when its connection is lost."""
    @web.middleware
    async def read_whole(request: web.Request, handler: Handler) -> web.StreamResponse:
        gate = listener.gates.get(request.transport) if request.transport else None
        source = gate.source if gate is not None else ""
        size = request.content_length if request.body_exists else 0
        if size is not None and size > listener.limits.max_body:
            raise web.HTTPRequestEntityTooLarge(max_size=listener.limits.max_body,
                                                actual_size=size)
        if gate is not None:
            gate.handling = asyncio.current_task()
        try:
            async with listener.bodies.share(source, listener.limits.max_body
                                             if size is None else size):
                await request.read()  # kept by the request: the handler's read is free
                if gate is not None:
                    gate.deadlines.request_read()
                response = await handler(request)
                # written here, within the share: an answer is about as large as its
                # request (a review, a converted job), and a client that does not read it
                # holds it until the write deadline (_Gate.pause_writing)
                await response.prepare(request)
                await response.write_eof()
                return response
        finally:
            if gate is not None:
                gate.handling = None
    return read_whole


async def serve(name: str, app: web.Application, host: str, port: int,
                ssl_context: ssl.SSLContext | None = None,
                limits: ConnectionLimits | None = None) -> Listener:
    """Serve `app` at host:port (TLS with `ssl_context`) within `limits`."""
    limits = limits or ConnectionLimits()
    # a body waiting for its share is buffered up to twice the read size, then the
    # connection is not read: 128 KiB, not aiohttp's default 512 KiB, per waiting request
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=limits.idle_timeout,
                           read_bufsize=READ_SIZE)
    listener = Listener(name, runner, ssl_context, limits)
    app.middlewares.append(_read_whole(listener))
    await runner.setup()
    await listener.start(host, port)
    # the port bound, which a caller that asked for port 0 learns here
    log.info("%s serving on %s:%d", name, host, listener.port)
    return listener
