"""The manager's HTTP endpoints: Prometheus metrics, /healthz and /readyz."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest


def parse_address(address: str) -> tuple[str, int] | None:
    """':8080' -> ('0.0.0.0', 8080); '0' disables the endpoint (controller-runtime's rule)."""
    if address in ("0", ""):
        return None
    host, _, port = address.rpartition(":")
    return (host or "0.0.0.0", int(port))


async def start(address: str, routes: dict[str, Callable[[], tuple[int, str, str]]]
                ) -> web.AppRunner | None:
    where = parse_address(address)
    if where is None:
        return None

    def handler(fn: Callable[[], tuple[int, str, str]]
                ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            status, content_type, body = fn()
            return web.Response(status=status, body=body.encode(),
                                headers={"Content-Type": content_type})
        return handle

    app = web.Application()
    for path, fn in routes.items():
        app.router.add_get(path, handler(fn))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, where[0], where[1]).start()
    return runner


def metrics_body() -> tuple[int, str, str]:
    return 200, CONTENT_TYPE_LATEST, generate_latest().decode()
