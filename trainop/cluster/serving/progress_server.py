"""The manager's end of Kubeflow Trainer's progress route (KEP-2779), beside its webhook
(--progress-server): a job's lead pod without a rank supervisor POSTs its report to
`/apis/kubeflow.org/v1/namespaces/NS/PLURAL/NAME/progress` with a projected token of the
job's audience (engine/progress_server.py), as a TrainJob's pod POSTs to Trainer's.

A report is taken only from the job's own pod: the token goes to a TokenReview for that
job's audience (a token minted for another job, or any other audience, is refused), and
the pod the API server says it is bound to must be one the job controls, by UID (Trainer
checks the audience and the namespace; here a pod of another job in the namespace that
projects a token of this job's audience is refused too). Every bound holds for a hostile
caller: the body (64 KiB), the reviews in flight (a flood of unknown tokens is answered
503 without reaching the API server), the reviews remembered, and the reports taken (at
most one a job each second: more are answered 429, said once a job)."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from typing import Any

from aiohttp import web

from trainop.api import KINDS
from trainop.cluster.reading.caches import Caches
from trainop.cluster.reading.client import REQUEST_ERRORS, Client
from trainop.cluster.reading.records import owner_key
from trainop.cluster.reading.reports import HeardReports
from trainop.cluster.serving.authn import keep
from trainop.engine import progress_server
from trainop.engine.observed import Reported
from trainop.engine.progress import LIMIT, read

log = logging.getLogger(__name__)

ROUTE = progress_server.path("{namespace}", "{plural}", "{name}")
GAP = 1.0
"""Seconds between two reports taken of one job; one sooner is answered 429."""
REVIEWS = 4
"""TokenReviews in flight at once of tokens not known; a report beyond them is answered
503."""
KNOWN_REVIEWS = 2
"""Reviews in flight at once of tokens last found good: slots of their own, so that a
flood of unknown tokens cannot keep a job's pod out once its review expires."""
KNOWN_KEPT = 4096
REVIEW_SECONDS = 60.0
"""How long a token's review is remembered (a token lives an hour: the kubelet renews it
well before)."""
REVIEWS_KEPT = 1000
JOBS_KEPT = 4096
"""Jobs whose last report's time is kept for GAP; beyond them, those past it are dropped."""
POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"


class ProgressServer:
    """The route's handler. It answers 503 until the caches it checks pods in are there
    (`attach`)."""

    def __init__(self, client: Client, heard: HeardReports) -> None:
        self.client, self.heard = client, heard
        self.caches: Caches | None = None
        self._reviews: OrderedDict[tuple[str, str], tuple[float, tuple[str, str] | None]] = \
            OrderedDict()
        self._reviewing = {False: 0, True: 0}  # by whether the token is known
        self._known: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._taken: dict[tuple[str, str], float] = {}
        self._said: set[tuple[str, str]] = set()

    def attach(self, caches: Caches) -> None:
        self.caches = caches

    def routes(self, app: web.Application) -> None:
        app.router.add_post(ROUTE, self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        ns, plural, name = (request.match_info[k] for k in ("namespace", "plural", "name"))
        kind = next((k for k, info in KINDS.items() if info.plural == plural), None)
        body = await request.read()
        if len(body) > LIMIT:
            return _failure(413, f"Payload too large: a report holds at most {LIMIT} bytes")
        token = _bearer(request.headers.get("Authorization"))
        if token is None:
            return _failure(403, "Forbidden")
        caches = self.caches
        if caches is None or caches.pods is None:
            return _failure(503, "The manager is starting: report again")
        jobs = caches.jobs.get(kind or "")
        job = jobs.get(f"{ns}/{name}") if jobs is not None and kind is not None else None
        if kind is None or job is None:
            return _failure(404, "Job not found")
        key = f"{ns}/{name}"
        if (kind, key) in self._taken and time.monotonic() - self._taken[(kind, key)] < GAP:
            if (kind, key) not in self._said:
                self._said.add((kind, key))
                log.info("%s %s reports more often than every %ss: the others are refused "
                         "(429)", kind, key, GAP)
            return _failure(429, f"Too many reports: one a job every {GAP:g} s", retry=GAP)
        who = await self._review(token, progress_server.audience(ns, plural, name))
        if who == "busy":
            return _failure(503, "Too many reports being checked: report again")
        if who is None:
            return _failure(403, "Forbidden")
        pod = caches.pods.get(f"{ns}/{who[0]}")
        if pod is None or pod.meta.uid != who[1] or \
                pod.meta.owner_key != owner_key(ns, kind, job.meta.uid):
            return _failure(403, "Forbidden: the token is not of a pod of this job")
        try:
            doc = json.loads(body)
            read(doc)
        except (ValueError, RecursionError) as err:
            return _failure(422, f"Invalid payload: {err}")
        self._took(kind, key)
        self.heard.put(kind, key, Reported(who[0], doc))
        return web.json_response(doc)

    def _took(self, kind: str, key: str) -> None:
        now = time.monotonic()
        self._taken[(kind, key)] = now
        if len(self._taken) > JOBS_KEPT:  # only a job reported within GAP still counts
            self._taken = {k: t for k, t in self._taken.items() if now - t < GAP}
            self._said &= set(self._taken)

    async def _review(self, token: str, audience: str) -> tuple[str, str] | str | None:
        """The pod (name, UID) the token is bound to, where it is valid for `audience`;
        None where it is not, "busy" where too many reviews are under way."""
        cached = (hashlib.sha256(token.encode()).hexdigest(), audience)
        hit = self._reviews.get(cached)
        if hit is not None and time.monotonic() - hit[0] < REVIEW_SECONDS:
            return hit[1]
        known = cached in self._known
        if self._reviewing[known] >= (KNOWN_REVIEWS if known else REVIEWS):
            return "busy"
        self._reviewing[known] += 1
        try:
            review: dict[str, Any] = await self.client.create(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                 "spec": {"token": token, "audiences": [audience]}})
        except REQUEST_ERRORS as err:
            log.warning("cannot review a progress report's token: %s", err)
            return "busy"  # cannot tell now: neither taken nor refused for good
        finally:
            self._reviewing[known] -= 1
        who = _bound_pod(review.get("status") or {}, audience)
        keep(self._reviews, cached, (time.monotonic(), who), REVIEWS_KEPT)
        if who is not None:
            keep(self._known, cached, None, KNOWN_KEPT)
        else:
            self._known.pop(cached, None)
        return who


def _bound_pod(status: dict[str, Any], audience: str) -> tuple[str, str] | None:
    """The pod a reviewed token is bound to (its name and UID: a UID no pod of another
    namespace has), where the review says it holds for `audience`."""
    user = status.get("user") or {}
    extra = user.get("extra") or {}
    names, uids = extra.get(POD_NAME) or [None], extra.get(POD_UID) or [None]
    if status.get("authenticated") is not True or audience not in (
            status.get("audiences") or []):
        return None
    if not (isinstance(names[0], str) and isinstance(uids[0], str)):
        return None  # a token bound to no pod
    return names[0], uids[0]


def _bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header (the scheme in any case)."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token and " " not in token else None


def _failure(code: int, message: str, retry: float | None = None) -> web.Response:
    """A metav1.Status, as Trainer's status server answers."""
    headers = {"Retry-After": f"{retry:g}"} if retry is not None else None
    return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                              "message": message, "code": code}, status=code, headers=headers)
