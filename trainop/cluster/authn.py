"""Authentication and authorization of metrics scrapes, as controller-runtime's secure
metrics: the bearer token goes to a TokenReview, the user to a SubjectAccessReview for
`get` on the non-resource URL /metrics. Answers are cached for a short while."""

from __future__ import annotations

import time
from typing import Any

from trainop.cluster.client import REQUEST_ERRORS, Client

CACHE_SECONDS = 30.0
MAX_REVIEWS = 4
"""Reviews in flight at once; a scrape beyond them is answered 503 at once (a flood of
unknown tokens costs the API server at most this many requests at a time)."""


class TokenAuthorizer:
    def __init__(self, client: Client):
        self.client = client
        self._cache: dict[tuple[str, str], tuple[float, int]] = {}
        self._reviewing = 0

    async def check(self, authorization: str | None, path: str) -> int:
        """200 when allowed, 401 without a valid token, 403 when not permitted, 503 when
        too many reviews are under way."""
        if not authorization or not authorization.startswith("Bearer "):
            return 401
        token = authorization[len("Bearer "):].strip()
        key = (token, path)
        hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < CACHE_SECONDS:
            return hit[1]
        if self._reviewing >= MAX_REVIEWS:
            return 503
        self._reviewing += 1
        try:
            code = await self._review(token, path)
        finally:
            self._reviewing -= 1
        self._cache[key] = (time.monotonic(), code)
        if len(self._cache) > 1000:
            self._cache.clear()
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
