"""The admission webhook: validation (and, for installs that register it, defaulting) of
every job kind, served over TLS 1.2+ with the same functions `trainop validate` and the
controllers use.

Certificates come from --webhook-cert-dir when something (cert-manager) put tls.crt and
tls.key there; otherwise the manager keeps a CA and serving certificate in one Secret that
every replica serves, renews them there before they expire, and patches the CA bundle into
the webhook configurations.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from aiohttp import web
from prometheus_client import Counter, Gauge

from trainop.api import (
    KINDS,
    InvalidJob,
    default_job,
    load_job,
    nesting,
    parse_job,
    validate_update,
)
from trainop.api.conversion import ConversionError, convert
from trainop.api.crd import CONVERSION_PATH
from trainop.api.install import path_for
from trainop.cluster.fairqueue import FairQueue
from trainop.cluster.options import WebhookOptions
from trainop.cluster.reading.client import Client
from trainop.cluster.serving import listener
from trainop.cluster.serving.webhook_certs import WebhookCertificates

log = logging.getLogger("trainop.webhook")
JUDGES = 2
"""Reviews decoded and judged at once (in worker threads)."""
JUDGE_WAIT = 10.0
"""Seconds a review waits for a judge before it is answered 503: the API server waits for
an admission webhook 10 s (the shipped timeoutSeconds), so a review that waited longer is
answered to nobody."""
WAITING = Gauge("trainop_webhook_reviews_waiting",
                "Reviews read whole that wait for a judge")
BUSY = Counter("trainop_webhook_reviews_busy_total",
               "Reviews answered 503 because no judge was free in time")
LEFT_OUT = Counter("trainop_conversion_annotations_ignored_total",
                   "Stored jobs read at another version whose trainop annotations could not "
                   "be taken and were left out of that form")

def _response(review: dict[str, Any], allowed: bool, message: str = "",
              patch: list[dict[str, Any]] | None = None,
              warnings: list[str] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": (review.get("request") or {}).get("uid", ""),
                                "allowed": allowed}
    if warnings:
        response["warnings"] = warnings
    if message:
        # a refusal is 403 Forbidden, as controller-runtime's validating webhooks answer
        # upstream's (kubectl: "Error from server (Forbidden): admission webhook ...")
        response["status"] = {"code": 200 if allowed else 403, "message": message,
                              "reason": "Forbidden" if not allowed else ""}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": response}


def validate_review(review: dict[str, Any]) -> dict[str, Any]:
    """The same decision as `trainop validate` (api.validation): a create meets today's
    rules, an update those of validate_update; an allowed job's deprecated fields are
    warnings, as upstream's."""
    request = review.get("request") or {}
    obj = request.get("object") or {}
    old = request.get("oldObject")
    try:
        if request.get("operation") == "UPDATE" and isinstance(old, dict):
            job = validate_update(old, obj)
        else:
            job = load_job(obj)
    except InvalidJob as err:
        return _response(review, False, "; ".join(str(p) for p in err.problems))
    return _response(review, True, warnings=job.spec.warnings())


def default_review(review: dict[str, Any]) -> dict[str, Any]:
    obj = (review.get("request") or {}).get("object") or {}
    try:
        defaulted = default_job(parse_job(obj)).to_dict()
    except InvalidJob:
        return _response(review, True)  # the validating webhook says what is wrong
    if defaulted.get("spec") == obj.get("spec"):
        return _response(review, True)
    return _response(review, True, patch=[{"op": "replace", "path": "/spec",
                                           "value": defaulted["spec"]}])


def answer(body: bytes, fn: Callable[[dict[str, Any]], dict[str, Any]]
           ) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body for one review: 400 with a reason for anything that is not
    an AdmissionReview with a request object, never an error of the server's own."""
    try:
        review = nesting.loads(body)
    except ValueError:
        return 400, {"message": "not an AdmissionReview: the body is not JSON"}
    request = review.get("request") if isinstance(review, dict) else None
    if not isinstance(request, dict) or not isinstance(request.get("object"), dict):
        return 400, {"message": "not an AdmissionReview: no request with an object"}
    try:
        return 200, fn(review)
    except RecursionError:
        return 200, _response(review, False, "the job is nested too deeply")


def convert_answer(body: bytes) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body for one ConversionReview (the CRDs' conversion webhook):
    every object at the desired version, or a Failure saying why (the API server then
    refuses the request, and no stored object changes); 400 for anything that is not a
    ConversionReview."""
    try:
        review = nesting.loads(body)
    except ValueError:
        return 400, {"message": "not a ConversionReview: the body is not JSON"}
    request = review.get("request") if isinstance(review, dict) else None
    if not isinstance(request, dict) or not isinstance(request.get("objects"), list) or \
            not isinstance(request.get("desiredAPIVersion"), str):
        return 400, {"message": "not a ConversionReview: no request with objects and a "
                                "desiredAPIVersion"}
    response: dict[str, Any] = {"uid": request.get("uid", "")}
    try:
        response["convertedObjects"] = [_converted(obj if isinstance(obj, dict) else {},
                                                   request["desiredAPIVersion"])
                                        for obj in request["objects"]]
        response["result"] = {"status": "Success"}
    except ConversionError as err:
        response["result"] = {"status": "Failure", "message": f"trainop: {err}"}
    except RecursionError:
        response["result"] = {"status": "Failure", "message": "the job is nested too deeply"}
    return 200, {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                 "response": response}


def _converted(obj: dict[str, Any], api_version: str) -> dict[str, Any]:
    """`obj` at `api_version`; what a stored job's annotations say that cannot be taken is
    left out (api.conversion), logged and counted."""
    ignored: list[str] = []
    out = convert(obj, api_version, ignored)
    for problem in ignored:
        meta = obj.get("metadata") or {}
        LEFT_OUT.inc()
        log.warning("%s %s/%s read at %s: %s; left out", obj.get("kind"),
                    meta.get("namespace"), meta.get("name"), api_version, problem)
    return out


class Judges:
    """Decoding and judging a review of megabytes takes seconds of CPU: in worker threads,
    `count` at once, so that the loop goes on serving probes and leases. Reviews waiting
    for a judge are served by fair share of the judges' seconds among client addresses
    (fairqueue: a few addresses sending large reviews do not hold the API server's small
    ones back behind all of theirs). A review waits at most `wait` seconds (TimeoutError);
    one whose client hung up (cancelled) leaves the queue at once, and a judge already at
    work on it is free again only when its thread ends, so that never more than `count`
    threads judge."""

    def __init__(self, count: int, wait: float):
        self.free = count
        self.wait = wait
        self._waiting: FairQueue[asyncio.Future[None]] = FairQueue()

    async def judge(self, respond: Callable[[bytes], tuple[int, dict[str, Any]]],
                    raw: bytes, source: str = "") -> tuple[int, dict[str, Any]]:
        waited = not self.free or len(self._waiting) > 0
        if waited:
            await self._turn(source)
        else:
            self.free -= 1
        started = time.monotonic()
        work = asyncio.ensure_future(asyncio.to_thread(respond, raw))

        def done(_: object) -> None:
            took = time.monotonic() - started
            if waited:
                self._waiting.charge(source, took)
            else:
                self._waiting.serve(source, took)
            self._next()
        work.add_done_callback(done)
        return await asyncio.shield(work)

    async def _turn(self, source: str) -> None:
        """Wait for a judge, as `source`'s turn comes."""
        turn = asyncio.get_running_loop().create_future()
        self._waiting.push(source, turn)
        WAITING.inc()
        try:
            await asyncio.wait_for(asyncio.shield(turn), self.wait)
        except BaseException:
            if turn.done() and not turn.cancelled():
                self._next()  # given a judge just as it left: the next one's
            else:
                turn.cancel()
            raise
        finally:
            WAITING.dec()

    def _next(self) -> None:
        """A judge is free: the next waiting review's, or free."""
        while len(self._waiting):
            _, turn = self._waiting.pop()
            if not turn.done():
                turn.set_result(None)
                return
        self.free += 1


class WebhookServer:
    """The webhook's HTTPS server: reviews and conversions answered by the judges, over
    the certificates `certificates` keeps."""

    def __init__(self, client: Client, options: WebhookOptions,
                 beside: Callable[[web.Application], None] | None = None):
        self.options = options
        self.certificates = WebhookCertificates(client, options)
        self._listener: listener.Listener | None = None
        self._judges = Judges(JUDGES, JUDGE_WAIT)
        self._beside = beside
        """Adds routes served beside the webhook's (the progress server's)."""

    async def start(self) -> None:
        await self.certificates.ensure()
        limits = listener.ConnectionLimits()
        app = web.Application(client_max_size=limits.max_body)
        for kind in KINDS:
            app.router.add_post(path_for("validate", kind),
                                self._handler(partial(answer, fn=validate_review)))
            app.router.add_post(path_for("mutate", kind),
                                self._handler(partial(answer, fn=default_review)))
        app.router.add_post(CONVERSION_PATH, self._handler(convert_answer))
        if self._beside is not None:
            self._beside(app)
        self._listener = await listener.serve("webhook", app, self.options.host,
                                              self.options.port, self.certificates.ctx,
                                              limits)

    def _handler(self, respond: Callable[[bytes], tuple[int, dict[str, Any]]]) -> Any:
        async def handle(request: web.Request) -> web.Response:
            raw = await request.read()
            try:
                status, body = await self._judges.judge(respond, raw, request.remote or "")
            except TimeoutError:
                BUSY.inc()
                return web.json_response({"message": "trainop: every judge is busy; try "
                                                     "again"}, status=503)
            return web.json_response(body, status=status)
        return handle

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.cleanup()
