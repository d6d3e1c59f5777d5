"""Authentication and authorization of metrics scrapes, as controller-runtime's secure
metrics: the bearer token goes to a TokenReview, the user to a SubjectAccessReview for
`get` on the non-resource URL /metrics. Answers are cached for a short while."""

from __future__ import annotations

import time
from typing import Any

from trainop.cluster.client import APIError, Client

CACHE_SECONDS = 30.0


class TokenAuthorizer:
    def __init__(self, client: Client):
        self.client = client
        self._cache: dict[tuple[str, str], tuple[float, int]] = {}

    async def check(self, authorization: str | None, path: str) -> int:
        """200 when allowed, 401 without a valid token, 403 when not permitted."""
        if not authorization or not authorization.startswith("Bearer "):
            return 401
        token = authorization[len("Bearer "):].strip()
        key = (token, path)
        hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < CACHE_SECONDS:
            return hit[1]
        code = await self._review(token, path)
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
        except APIError:
            return 403  # cannot tell: refuse
        return 200 if (sar.get("status") or {}).get("allowed") else 403
