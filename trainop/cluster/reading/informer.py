"""Shared informers: list + watch one resource type into an indexed cache of slim records.

One informer per resource type serves every controller. It lists (in pages), then
watches from the list's resourceVersion with bookmarks; a 410 Gone (the server no longer
has that version) re-lists and reports what changed meanwhile, deletions included; a
broken connection reconnects with exponential back-off and resumes from the last version.

An object that cannot be read (its author wrote what the decoder refuses) is skipped,
logged and counted, never taken for a broken stream: one tenant's object must not stop
the cache every namespace shares. Its last readable record, if any, stays cached.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import aiohttp
from prometheus_client import Counter, Gauge

from trainop.api.numbers import whole_number
from trainop.api.resources import Resource
from trainop.cluster.reading.client import APIError, Client, MalformedResponse

log = logging.getLogger("trainop.informer")
R = TypeVar("R")
class Change(enum.StrEnum):
    """What happened to a cached object, as a handler is told."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


Handler = Callable[[Change, Any, Any], None]
"""(what happened, new record or None, old record or None)"""

RELISTS = Counter("trainop_informer_relists_total", "Full re-lists after a watch expired",
                  ["resource"])
WATCHES = Gauge("trainop_informer_watches", "Watch connections open to the API server")
CACHED = Gauge("trainop_cache_objects", "Objects held in the shared cache", ["resource"])
UNREADABLE = Counter("trainop_informer_unreadable_objects_total", "Objects listed or "
                     "watched that could not be read and were skipped", ["resource"])
ERRORS = Counter("trainop_informer_errors_total", "Lists or watches that failed and were "
                 "retried", ["resource"])
PAGE = 500
"""Items a list page asks for at most."""
PAGE_BYTES = 8 * 2**20
"""Bytes a list page should have: the next page asks for as many items as fit, by the
size of the items so far (60 jobs of 1.3 MiB in one page are 1 GiB decoded)."""
WATCH_GRACE = 60
"""Seconds of silence past a watch's own timeout after which its connection counts as dead."""


class Store(Generic[R]):
    """The cache of one resource type (client-go's indexer): records by key, indexed by
    their owner and the `indexes` given, and no record older than the one it holds."""

    def __init__(self, plural: str, key: Callable[[R], str], owner: Callable[[R], str | None],
                 version: Callable[[R], str] | None = None,
                 indexes: Mapping[str, Callable[[R], str | None]] | None = None):
        self.key_of = key
        self.version = version
        self.items: dict[str, R] = {}
        self._index_of: dict[str, Callable[[R], str | None]] = {"owner": owner,
                                                                 **(indexes or {})}
        self._indexed: dict[str, defaultdict[str, dict[str, R]]] = {
            name: defaultdict(dict) for name in self._index_of}
        self._cached = CACHED.labels(plural)

    def indexed(self, index: str, value: str) -> list[R]:
        """The cached records whose `index` (one of `indexes`) is `value`."""
        return list(self._indexed[index].get(value, {}).values())

    def older(self, rec: R, than: R | None) -> bool:
        """Whether `rec` is older than the cached `than` (etcd revisions are integers)."""
        if self.version is None or than is None:
            return False
        new, cur = whole_number(self.version(rec)), whole_number(self.version(than))
        return new is not None and cur is not None and new < cur

    def put(self, rec: R) -> tuple[bool, R | None]:
        """(whether `rec` is now cached, the record it took the place of)."""
        key = self.key_of(rec)
        old = self.items.get(key)
        if self.older(rec, old):
            return False, old  # a watch event from before our own write
        if old is not None:
            self._unindex(key, old)
        self.items[key] = rec
        for name, value_of in self._index_of.items():
            if value := value_of(rec):
                self._indexed[name][value][key] = rec
        if old is None:
            self._cached.inc()
        return True, old

    def remove(self, key: str) -> R | None:
        """The record taken out, if there was one."""
        old = self.items.pop(key, None)
        if old is not None:
            self._cached.dec()
            self._unindex(key, old)
        return old

    def _unindex(self, key: str, rec: R) -> None:
        for name, value_of in self._index_of.items():
            index, value = self._indexed[name], value_of(rec)
            if value and value in index:
                index[value].pop(key, None)
                if not index[value]:
                    del index[value]


class Informer(Generic[R]):
    """One resource type's store, kept by its reflector, and the handlers told of each
    change (client-go's shared informer)."""

    def __init__(self, client: Client, resource: Resource, decode: Callable[[dict[str, Any]],
                 R | None], key: Callable[[R], str], owner: Callable[[R], str | None],
                 namespace: str | None = None, label_selector: str | None = None,
                 version: Callable[[R], str] | None = None, first_page: int = PAGE,
                 indexes: Mapping[str, Callable[[R], str | None]] | None = None):
        """`owner`: the value `owned_by` finds a record by; `indexes`: more such values,
        by name, that `indexed` finds records by (None: not indexed)."""
        self.resource = resource
        self.decode = decode
        self.label_selector = label_selector
        self.store = Store(resource.plural, key, owner, version, indexes)
        self.items = self.store.items
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        self._reflector = Reflector(client, resource, namespace, label_selector, first_page,
                                    self)

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)

    def get(self, key: str) -> R | None:
        return self.items.get(key)

    def owned_by(self, uid: str) -> list[R]:
        return self.store.indexed("owner", uid)

    def indexed(self, index: str, value: str) -> list[R]:
        """The cached records whose `index` (one of `indexes`) is `value`."""
        return self.store.indexed(index, value)

    def put_newer(self, obj: dict[str, Any]) -> None:
        """Cache what a write returned, silently: the watch brings the same version later,
        and in between no reconcile may see the state from before the write."""
        _, rec = self._reflector.read(obj)
        if rec is not None:
            self.store.put(rec)

    def put(self, rec: R) -> None:
        """Cache what the API server sent, and tell the handlers."""
        stored, old = self.store.put(rec)
        if stored:
            self._emit(Change.MODIFIED if old is not None else Change.ADDED, rec, old)

    def remove(self, key: str) -> None:
        old = self.store.remove(key)
        if old is not None:
            self._emit(Change.DELETED, None, old)

    def _emit(self, change: Change, new: R | None, old: R | None) -> None:
        for handler in self.handlers:
            try:
                handler(change, new, old)
            except Exception:  # a handler's bug must not stop the informer
                log.exception("informer handler failed for %s", self.resource.plural)

    async def run(self) -> None:
        """List and watch until cancelled; never raises."""
        await self._reflector.run()


class Reflector(Generic[R]):
    """Lists and watches one resource type into an informer (client-go's reflector)."""

    def __init__(self, client: Client, resource: Resource, namespace: str | None,
                 label_selector: str | None, first_page: int, informer: Informer[R]):
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.first_page = first_page
        self.informer = informer
        self.resource_version: str | None = None
        self.watch_timeout = (240, 480)

    def read(self, obj: dict[str, Any]) -> tuple[bool, R | None]:
        """(whether `obj` could be read, its record or None where it is not cached)."""
        try:
            return True, self.informer.decode(obj)
        except Exception as err:  # whatever one object holds, the stream goes on
            UNREADABLE.labels(self.resource.plural).inc()
            log.warning("%s %s cannot be read (%s: %s); skipped", self.resource.plural,
                        _key_in(obj), type(err).__name__, err)
            return False, None

    def _params(self) -> dict[str, str]:
        return {"labelSelector": self.label_selector} if self.label_selector else {}

    async def _list(self) -> None:
        path = self.resource.path(self.namespace)
        informer = self.informer
        seen: set[str] = set()
        cont = ""
        limit = self.first_page
        while True:
            params = {**self._params(), "limit": str(limit)}
            if cont:
                params["continue"] = cont
            page, size = await self.client.get_sized(path, params)
            items = page.get("items")
            if not isinstance(items, list) and items is not None:
                raise MalformedResponse(f"list {path}: items is not a list")
            for obj in items or []:
                if not isinstance(obj, dict):
                    raise MalformedResponse(f"list {path}: an item that is not an object")
                obj.setdefault("metadata", {})
                readable, rec = self.read(obj)
                if not readable:
                    seen.add(_key_in(obj))  # what was cached of it stays
                if rec is None:
                    continue
                seen.add(informer.store.key_of(rec))
                informer.put(rec)
            if items:
                limit = max(1, min(PAGE, PAGE_BYTES * len(items) // max(size, 1)))
            meta = page.get("metadata") or {}
            del page, items  # this page's decoded objects go before the next one comes
            cont = meta.get("continue") or ""
            if not cont:
                self.resource_version = meta.get("resourceVersion")
                break
        for key in [k for k in informer.items if k not in seen]:
            informer.remove(key)  # deleted while we were not watching
        informer.synced.set()

    async def _watch(self) -> None:
        assert self.resource_version is not None
        seconds = random.randint(*self.watch_timeout)
        params = {**self._params(), "resourceVersion": self.resource_version,
                  "timeoutSeconds": str(seconds)}
        WATCHES.inc()
        try:
            # The server ends the watch after `seconds`: silence well past that is a
            # half-open connection, not a quiet cluster.
            await self._consume(params, read_timeout=seconds + WATCH_GRACE)
        finally:
            WATCHES.dec()

    async def _consume(self, params: dict[str, str], read_timeout: float | None = None) -> None:
        informer = self.informer
        async for event in self.client.watch(self.resource.path(self.namespace), params,
                                             read_timeout):
            etype, obj = event.get("type"), event.get("object") or {}
            if etype == "ERROR":
                raise APIError(int(obj.get("code") or 500), obj)
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if etype == "BOOKMARK":
                self.resource_version = rv or self.resource_version
                continue
            readable, rec = self.read(obj)
            if etype == "DELETED":
                informer.remove(informer.store.key_of(rec) if rec is not None
                                else _key_in(obj))
            elif rec is not None:
                informer.put(rec)
            elif readable and etype in ("ADDED", "MODIFIED"):
                informer.remove(_key_in(obj))  # no longer one to cache
            self.resource_version = rv or self.resource_version

    async def run(self) -> None:
        """List and watch until cancelled; never raises."""
        backoff = 0.5
        while True:
            try:
                if self.resource_version is None:
                    await self._list()
                await self._watch()
                backoff = 0.5  # a watch that ends normally (timeout) is renewed at once
            except asyncio.CancelledError:
                raise
            except APIError as err:
                if err.gone:
                    log.info("%s: watch expired (410 Gone); re-listing", self.resource.plural)
                    RELISTS.labels(self.resource.plural).inc()
                    self.resource_version = None
                    continue
                log.warning("%s: %s; retrying in %.1fs", self.resource.plural, err, backoff)
            except (aiohttp.ClientError, TimeoutError, ConnectionError, ValueError) as err:
                log.warning("%s: connection lost (%s); retrying in %.1fs",
                            self.resource.plural, err or type(err).__name__, backoff)
            except MalformedResponse as err:
                log.warning("%s: %s; the cache is kept, retrying in %.1fs",
                            self.resource.plural, err, backoff)
            except Exception:  # a bug here must not leave a cache that never changes again
                log.exception("%s: list/watch failed; retrying in %.1fs", self.resource.plural,
                              backoff)
            ERRORS.labels(self.resource.plural).inc()
            await asyncio.sleep(backoff * (0.5 + random.random()))
            backoff = min(backoff * 2, 30.0)


def _key_in(obj: dict[str, Any]) -> str:
    """The cache key of an object that may not decode (records' `meta.key`, or a
    cluster-scoped object's name)."""
    m = obj.get("metadata")
    namespace, name = (m.get("namespace"), m.get("name")) if isinstance(m, dict) else (None, None)
    return f"{namespace}/{name}" if namespace else str(name)


async def wait_synced(informers: list[Informer[Any]], timeout: float | None = None) -> None:
    waits = [asyncio.create_task(i.synced.wait()) for i in informers]
    try:
        await asyncio.wait_for(asyncio.gather(*waits), timeout)
    finally:
        for w in waits:
            w.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await w
