"""Authentication and authorization of metrics scrapes, as controller-runtime's secure
metrics: the bearer token goes to a TokenReview, the user to a SubjectAccessReview for
`get` on the non-resource URL /metrics. Answers are cached for a short while."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, TypeVar

from trainop.cluster.reading.client import REQUEST_ERRORS, Client

CACHE_SECONDS = 30.0
MAX_REVIEWS = 4
"""Reviews of unknown tokens in flight at once; a scrape beyond them is answered 503 at
once (a flood of unknown tokens costs the API server at most this many requests at a
time)."""
KNOWN_REVIEWS = 2
"""Reviews in flight at once of tokens last found allowed: slots of their own, so that a
flood of unknown tokens cannot keep an allowed scraper out once its answer expires."""
ANSWERS_KEPT = 1000
KNOWN_KEPT = 64
"""Tokens last found allowed that are remembered as such (the most recent ones)."""


class TokenAuthorizer:
    def __init__(self, client: Client):
        self.client = client
        self._answers: OrderedDict[tuple[str, str], tuple[float, int]] = OrderedDict()
        self._known: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._reviewing = {False: 0, True: 0}  # by whether the token is known

    async def check(self, authorization: str | None, path: str) -> int:
        """200 when allowed, 401 without a valid token, 403 when not permitted, 503 when
        too many reviews are under way."""
        if not authorization or not authorization.startswith("Bearer "):
            return 401
        token = authorization[len("Bearer "):].strip()
        key = (token, path)
        hit = self._answers.get(key)
        if hit is not None and time.monotonic() - hit[0] < CACHE_SECONDS:
            return hit[1]
        known = key in self._known
        if self._reviewing[known] >= (KNOWN_REVIEWS if known else MAX_REVIEWS):
            return 503
        self._reviewing[known] += 1
        try:
            code = await self._review(token, path)
        finally:
            self._reviewing[known] -= 1
        keep(self._answers, key, (time.monotonic(), code), ANSWERS_KEPT)
        if code == 200:
            keep(self._known, key, None, KNOWN_KEPT)
        else:
            self._known.pop(key, None)
        return code

    async def _review(self, token: str, path: str) -> int:
        try:
            review: dict[str, Any] = await self.client.create(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                 "spec": {"token": token}})
            status = review.get("status") or {}
            if not status.get("authenticated"):
                return 401
            user = status.get("user") or {}
            sar: dict[str, Any] = await self.client.create(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                 "spec": {"user": user.get("username", ""), "groups": user.get("groups", []),
                          "uid": user.get("uid", ""),
                          "nonResourceAttributes": {"path": path, "verb": "get"}}})
        except REQUEST_ERRORS:
            return 403  # cannot tell: refuse
        return 200 if (sar.get("status") or {}).get("allowed") else 403


K = TypeVar("K")
V = TypeVar("V")


def keep(store: OrderedDict[K, V], key: K, value: V, most: int) -> None:
    """Store `value` as the newest entry, dropping the oldest beyond `most` (a flood of
    new keys pushes out old ones one by one; it never empties the store)."""
    store[key] = value
    store.move_to_end(key)
    while len(store) > most:
        store.popitem(last=False)
