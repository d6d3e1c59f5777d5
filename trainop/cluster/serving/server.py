"""The manager's HTTP endpoints: Prometheus metrics, /healthz and /readyz."""

from __future__ import annotations

import ssl
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from trainop.cluster.serving import listener
from trainop.cluster.serving.certs import ca_and_serving_cert


def parse_address(address: str) -> tuple[str, int] | None:
    """':8080' -> ('0.0.0.0', 8080); '0' disables the endpoint (controller-runtime's rule)."""
    if address in ("0", ""):
        return None
    host, _, port = address.rpartition(":")
    return (host or "0.0.0.0", int(port))


Authorizer = Callable[[str | None, str], Awaitable[int]]
REFUSALS = {401: "Unauthorized", 403: "Forbidden", 503: "Too many scrapes being authorized"}


async def start(address: str, routes: dict[str, Callable[[], tuple[int, str, str]]],
                ssl_context: ssl.SSLContext | None = None,
                authorize: Authorizer | None = None, name: str = "http"
                ) -> listener.Listener | None:
    """Serve `routes` at `address`; with `authorize`, every request needs its say-so.
    `name` labels the server's metrics."""
    where = parse_address(address)
    if where is None:
        return None

    def handler(fn: Callable[[], tuple[int, str, str]]
                ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            if authorize is not None:
                code = await authorize(request.headers.get("Authorization"), request.path)
                if code != 200:
                    return web.Response(status=code, text=REFUSALS.get(code, "Forbidden"))
            status, content_type, body = fn()
            return web.Response(status=status, body=body.encode(),
                                headers={"Content-Type": content_type})
        return handle

    app = web.Application()
    for path, fn in routes.items():
        app.router.add_get(path, handler(fn))
    return await listener.serve(name, app, where[0], where[1], ssl_context)


def self_signed_context() -> ssl.SSLContext:
    """TLS 1.2+ with a certificate made for this process (scrapers skip verification or
    pin it, as with controller-runtime's secure metrics)."""
    pair = ca_and_serving_cert("trainop-metrics", ["localhost"], ["127.0.0.1"], days=365)[1]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    # ssl reads a chain from files only; they live as long as that read (the key stays in
    # no file once the context holds it)
    with tempfile.TemporaryDirectory(prefix="trainop-metrics-") as d:
        cert, key = Path(d) / "metrics.crt", Path(d) / "metrics.key"
        cert.write_bytes(pair.cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(pair.key_pem)
        ctx.load_cert_chain(cert, key)
    return ctx


def metrics_body() -> tuple[int, str, str]:
    return 200, CONTENT_TYPE_LATEST, generate_latest().decode()
