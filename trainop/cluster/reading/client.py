"""A small asyncio client for the Kubernetes API: JSON over aiohttp, a QPS/burst limiter,
429 back-off, streaming watches, and a count of every request for the metrics."""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
from prometheus_client import Counter

from trainop.api import nesting
from trainop.cluster.fairqueue import QUIET_CREDIT_SECONDS, FairQueue
from trainop.cluster.reading.config import ClusterConfig

log = logging.getLogger("trainop.client")

API_REQUESTS = Counter("trainop_api_requests_total", "Requests sent to the Kubernetes API",
                       ["verb", "resource", "code"])
MAX_429_RETRIES = 8
MAX_IN_FLIGHT = 32
"""Requests in flight at once. Each is a TLS connection of about 300 KiB (asyncio's read
buffer is 256 KiB): 32 cost half the memory of 64, and the API server makes no more
objects a second with 64 (bench/README.md)."""
WARNINGS_KEPT = 256
"""Distinct API server warnings remembered (logged once each while remembered)."""


class APIError(Exception):
    """A non-2xx answer from the API server."""

    def __init__(self, status: int, body: dict[str, Any] | str):
        self.status = status
        self.body = body
        message = body.get("message", "") if isinstance(body, dict) else str(body)[:300]
        self.reason = body.get("reason", "") if isinstance(body, dict) else ""
        super().__init__(f"{status} {self.reason}: {message}".strip())

    @property
    def message(self) -> str:
        return self.body.get("message", "") if isinstance(self.body, dict) else str(self.body)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """409: the object changed since it was read, or one of that name exists."""
        return self.status == 409

    @property
    def gone(self) -> bool:
        """410: the resourceVersion a watch starts from is no longer kept."""
        return self.status == 410


class MalformedResponse(Exception):
    """A 2xx answer whose body is not the JSON object the API always sends (a proxy's page,
    a broken stream): never read as an empty answer."""


REQUEST_ERRORS = (APIError, MalformedResponse, aiohttp.ClientError, OSError, TimeoutError)
"""What a request can end with: an answer that is not 2xx (or not JSON), or no answer."""


class TokenBucket:
    """client-go's flowcontrol: `qps` tokens a second, at most `burst` saved up."""

    def __init__(self, qps: float, burst: int):
        self.qps = qps
        self.burst = max(burst, 1)
        self.tokens = float(self.burst)
        self.last = time.monotonic()

    def reserve(self) -> float:
        """Take a token now; the seconds until it is really there (0 when it is)."""
        if self.qps <= 0:
            return 0.0
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
        self.last = now
        self.tokens -= 1
        return 0.0 if self.tokens >= 0 else -self.tokens / self.qps

    def full(self) -> bool:
        """Whether as many tokens are saved up as there can be (none taken lately)."""
        return self.ready() and self.tokens >= self.burst

    def ready(self) -> bool:
        """Whether a token is there now (none is taken)."""
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
        self.last = now
        return self.tokens >= 1


class FairLimiter:
    """The client's QPS/burst, shared fairly among flows (namespaces), in the spirit of the
    API server's Priority and Fairness: a request takes a token at once while nobody waits;
    once requests wait, the tokens go by fair share (fairqueue) to the flow with requests
    waiting that has had fewest, and a flow that was quiet may take QUIET_CREDIT_SECONDS of
    the QPS first, so that a namespace with thousands of requests queued delays another's
    few by none of them, and another's many by half the budget at most."""

    def __init__(self, qps: float, burst: int):
        self.bucket = TokenBucket(qps, burst)
        self._waiting: FairQueue[asyncio.Future[None]] = FairQueue(
            credit=QUIET_CREDIT_SECONDS * qps)
        self._dispatcher: asyncio.Task[None] | None = None

    async def take(self, flow: str = "") -> None:
        """Wait for a token on behalf of `flow`."""
        if self.bucket.qps <= 0:
            return
        if not self._waiting and self.bucket.ready():
            self.bucket.reserve()
            self._waiting.serve(flow, 1)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.push(flow, waiter)
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.ensure_future(self._dispatch())
        await waiter  # (a waiter cancelled meanwhile is skipped, and takes no token)

    async def _dispatch(self) -> None:
        while self._waiting:
            flow, waiter = self._waiting.pop()
            if waiter.done():
                continue
            self._waiting.charge(flow, 1)
            wait = self.bucket.reserve()
            if wait:
                await asyncio.sleep(wait)
            if not waiter.done():
                waiter.set_result(None)

    def stop(self) -> None:
        """Stop handing out tokens (the client is closing)."""
        if self._dispatcher is not None:
            self._dispatcher.cancel()


def throttle_delay(retry_after: str, attempt: int) -> float:
    """Seconds to wait after the `attempt`-th 429: the server's Retry-After (1s when it
    gives none, at most 10s), growing by a quarter per attempt, times 1 to 1.5 at random."""
    try:
        delay = float(retry_after or 1)
    except ValueError:
        delay = 1.0
    return min(max(delay, 0.0), 10.0) * (1 + attempt / 4) * random.uniform(1.0, 1.5)


_WARNING = re.compile(r'\d{3} \S+ "((?:[^"\\]|\\.)*)"')


def warning_texts(values: list[str]) -> list[str]:
    """The texts of `Warning` headers (RFC 7234: `299 - "text"`), as the API server sends
    them for deprecated APIs and fields; a value of another shape is kept whole."""
    texts = []
    for value in values:
        found = _WARNING.findall(value)
        texts += [re.sub(r"\\(.)", r"\1", t) for t in found] if found else [value]
    return texts


def _namespace_of(path: str) -> str:
    """The namespace a request's path names ("" for a cluster-wide one)."""
    parts = path.split("?")[0].split("/")
    return parts[parts.index("namespaces") + 1] if "namespaces" in parts[:-1] else ""


def resource_of(path: str) -> str:
    """The resource (and subresource) an API path names, for a metric's label: never an
    object's name, which a job's author may choose (a series each)."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    rest = parts[3 if parts[:1] == ["apis"] else 2:]  # past /apis/GROUP/VERSION or /api/v1
    if len(rest) > 2 and rest[0] == "namespaces":
        rest = rest[2:]  # a namespace's resource, not the namespace itself
    return "/".join(rest[:1] + rest[2:3])


class Client:
    """Requests to one API server. `qps`/`burst` limit them as client-go does (0: no limit;
    the manager's limit is its --kube-api-qps/--kube-api-burst, `ManagerOptions`)."""

    def __init__(self, config: ClusterConfig, qps: float = 0, burst: int = 1,
                 max_connections: int = MAX_IN_FLIGHT):
        self.config = config
        self.limiter = FairLimiter(qps, burst)
        # Requests in flight are bounded here; watches hold a connection each on top.
        self._in_flight = asyncio.Semaphore(max_connections)
        self._session: aiohttp.ClientSession | None = None
        self.warnings: dict[str, None] = {}
        """The distinct warnings the API server has sent, the newest WARNINGS_KEPT (each
        logged once while kept: a warning may quote what a job's author wrote)."""

    def _note_warnings(self, headers: Any, method: str, path: str) -> None:
        # client-go prints each warning it is sent; once per text is enough to act on
        for text in warning_texts(headers.getall("Warning", [])):
            if text not in self.warnings:
                self.warnings[text] = None
                if len(self.warnings) > WARNINGS_KEPT:
                    del self.warnings[next(iter(self.warnings))]
                log.warning("API server warning on %s %s: %s", method, path.split("?")[0],
                            text)

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.config.ssl_context(), limit=0))
        return self._session

    async def close(self) -> None:
        self.limiter.stop()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _headers(self, content_type: str = "application/json") -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        token = self.config.bearer()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    async def request(self, method: str, path: str, body: Any = None,
                      params: dict[str, str] | None = None,
                      content_type: str = "application/json") -> dict[str, Any]:
        return (await self._request(method, path, body, params, content_type))[0]

    async def get_sized(self, path: str, params: dict[str, str] | None = None
                        ) -> tuple[dict[str, Any], int]:
        """GET, and the size of the body as sent (lists size their next page by it)."""
        return await self._request("GET", path, params=params)

    async def _request(self, method: str, path: str, body: Any = None,
                       params: dict[str, str] | None = None,
                       content_type: str = "application/json") -> tuple[dict[str, Any], int]:
        verb = method.lower()
        for attempt in range(MAX_429_RETRIES + 1):
            await self.limiter.take(_namespace_of(path))
            async with self._in_flight, self.session.request(
                method, self.config.server + path, params=params,
                data=None if body is None else orjson.dumps(body),
                headers=self._headers(content_type),
                timeout=aiohttp.ClientTimeout(total=60),
            ) as resp:
                API_REQUESTS.labels(verb, resource_of(path), str(resp.status)).inc()
                status, raw = resp.status, await resp.read()
                retry_after = resp.headers.get("Retry-After", "")
                self._note_warnings(resp.headers, method, path)
            if status == 429 and attempt < MAX_429_RETRIES:
                # The server asks us to slow down: wait as long as it says (outside the
                # in-flight slot), longer each time, with jitter so that the requests
                # refused together do not all come back together.
                await asyncio.sleep(throttle_delay(retry_after, attempt))
                continue
            try:
                data = nesting.loads(raw) if raw else {}
            except orjson.JSONDecodeError:
                data = None
            if status >= 400:
                raise APIError(status, data if isinstance(data, dict)
                               else raw.decode(errors="replace"))
            if not isinstance(data, dict):
                raise MalformedResponse(f"{method} {path}: {status} with a body that is not a "
                                        f"JSON object: {raw[:100]!r}")
            return data, len(raw)
        raise AssertionError("unreachable")

    async def get(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        return await self.request("GET", path, params=params)

    async def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        return await self.request("POST", path, obj)

    async def replace(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        return await self.request("PUT", path, obj)

    async def patch(self, path: str, patch: dict[str, Any] | list[dict[str, Any]],
                    kind: str = "application/merge-patch+json") -> dict[str, Any]:
        return await self.request("PATCH", path, patch, content_type=kind)

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.request("DELETE", path, body)

    async def watch(self, path: str, params: dict[str, str], read_timeout: float | None = None
                    ) -> AsyncIterator[dict[str, Any]]:
        """Stream watch events ({type, object}) until the server ends the watch. Nothing
        read for `read_timeout` seconds means a dead connection (TimeoutError)."""
        params = {**params, "watch": "true", "allowWatchBookmarks": "true"}
        async with self.session.get(
            self.config.server + path, params=params, headers=self._headers(),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout),
        ) as resp:
            API_REQUESTS.labels("watch", resource_of(path), str(resp.status)).inc()
            self._note_warnings(resp.headers, "WATCH", path)
            if resp.status >= 400:
                raw = await resp.read()
                try:
                    body = nesting.loads(raw)
                except orjson.JSONDecodeError:
                    body = raw.decode(errors="replace")
                raise APIError(resp.status, body)
            buffer = b""
            async for chunk in resp.content.iter_any():
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if not line.strip():
                        continue
                    try:
                        event = nesting.loads(line)
                    except orjson.JSONDecodeError:
                        event = None
                    if not isinstance(event, dict):
                        raise MalformedResponse(f"watch {path}: a line that is not a JSON "
                                                f"object: {line[:100]!r}")
                    yield event
