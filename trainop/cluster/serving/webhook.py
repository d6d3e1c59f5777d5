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
import datetime as dt
import json
import logging
import ssl
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import Counter, Gauge

from trainop import wallclock
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
from trainop.api.kinds import GROUP, OTHER_VERSIONS
from trainop.api.resources import CRDS, SECRETS
from trainop.cluster.fairqueue import FairQueue
from trainop.cluster.options import WebhookOptions
from trainop.cluster.reading.client import REQUEST_ERRORS, APIError, Client
from trainop.cluster.serving import listener
from trainop.cluster.serving.certs import ca_and_serving_cert, not_after

log = logging.getLogger("trainop.webhook")
RENEW_BEFORE = dt.timedelta(days=2)
CERT_DAYS = 7
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
CONFIG_KINDS = (("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations"),
                ("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations"))


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


def _pems_of(secret: dict[str, Any] | None) -> dict[str, bytes] | None:
    data = (secret or {}).get("data") or {}
    if not all(data.get(k) for k in ("ca.crt", "tls.crt", "tls.key")):
        return None
    return {k: base64.b64decode(data[k]) for k in ("ca.crt", "tls.crt", "tls.key")}


def _still_valid(cert_pem: bytes, margin: dt.timedelta) -> bool:
    try:
        return not_after(cert_pem) - wallclock.now() > margin
    except ValueError:
        return False


class WebhookServer:
    def __init__(self, client: Client, options: WebhookOptions):
        self.client = client
        self.options = options
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        self.ready = False
        self.self_managed = False
        self.shared = False
        """Serving the certificates of the Secret every replica shares."""
        self.serving: bytes | None = None
        """The certificate loaded into the TLS context (None: none yet)."""
        self._listener: listener.Listener | None = None
        self._judges = Judges(JUDGES, JUDGE_WAIT)

    @property
    def cert(self) -> Path:
        return self.options.cert_dir / "tls.crt"

    @property
    def key(self) -> Path:
        return self.options.cert_dir / "tls.key"

    @property
    def marker(self) -> Path:
        return self.options.cert_dir / ".trainop-managed"

    def _new_pems(self, previous_ca: bytes | None = None) -> dict[str, bytes]:
        """A fresh CA and serving certificate for the webhook service. The CA bundle keeps
        the previous CA while it is valid: replicas still serving the old certificate
        stay trusted until they load the new one."""
        svc, ns = self.options.service_name, self.options.service_namespace
        ca, serving = ca_and_serving_cert(
            svc, [svc, f"{svc}.{ns}", f"{svc}.{ns}.svc", f"{svc}.{ns}.svc.cluster.local",
                  "localhost"], ["127.0.0.1"], days=CERT_DAYS)
        bundle = ca.cert_pem
        if previous_ca and _still_valid(previous_ca, dt.timedelta(0)):
            bundle += previous_ca.split(b"-----END CERTIFICATE-----")[0] + \
                b"-----END CERTIFICATE-----\n"
        return {"ca.crt": bundle, "tls.crt": serving.cert_pem, "tls.key": serving.key_pem}

    def _install(self, pems: dict[str, bytes]) -> bool:
        """Serve `pems` from now on; False when they are what is served already. (Files
        alike on disk do not count: a container restarted in its pod finds them there.)"""
        if self.serving == pems["tls.crt"]:
            return False
        self.options.cert_dir.mkdir(parents=True, exist_ok=True)
        self.key.touch(mode=0o600)
        self.key.write_bytes(pems["tls.key"])
        self.cert.write_bytes(pems["tls.crt"])
        (self.options.cert_dir / "ca.crt").write_bytes(pems["ca.crt"])
        self.marker.write_text("made by trainop; renewed by trainop\n")
        self.ctx.load_cert_chain(self.cert, self.key)
        self.serving = pems["tls.crt"]
        return True

    async def _patch_ca_bundle(self, ca_pem: bytes) -> None:
        bundle = base64.b64encode(ca_pem).decode()
        for api_version, plural in CONFIG_KINDS:
            path = f"/apis/{api_version}/{plural}/{self.options.config_name}"
            try:
                config = await self.client.get(path)
            except APIError as err:
                if err.not_found:
                    log.info("no %s/%s to give the CA bundle to", plural,
                             self.options.config_name)
                    continue
                raise
            patch = [{"op": "replace", "path": f"/webhooks/{i}/clientConfig/caBundle",
                      "value": bundle} for i in range(len(config.get("webhooks") or []))]
            if patch:
                await self.client.patch(path, patch, "application/json-patch+json")
                log.info("CA bundle patched into %s/%s", plural, self.options.config_name)
        for kind in OTHER_VERSIONS:
            await self._patch_conversion_ca(f"{KINDS[kind].plural}.{GROUP}", bundle)

    async def _patch_conversion_ca(self, name: str, bundle: str) -> None:
        """The CA bundle into a CRD's conversion webhook, where the CRD converts by one."""
        path = CRDS.path(name=name)
        try:
            crd = await self.client.get(path)
            conversion = crd.get("spec", {}).get("conversion") or {}
            if conversion.get("strategy") != "Webhook":
                log.info("CRD %s converts no versions (strategy %s): no CA bundle for it",
                         name, conversion.get("strategy", "None"))
                return
            await self.client.patch(path, [{
                "op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle",
                "value": bundle}], "application/json-patch+json")
        except APIError as err:
            if err.not_found or err.status == 403:
                # the jobs' own version still works; the others fail until the CA is there
                log.warning("CRD %s: cannot give its conversion webhook the CA (%s): its "
                            "versions but v1 cannot be read or written", name, err.message)
                return
            raise
        log.info("CA bundle patched into the conversion webhook of CRD %s", name)

    async def _shared_pems(self) -> dict[str, bytes]:
        """The certificates every replica serves, kept in one Secret: read, or made there
        by whichever replica comes first (or finds them close to expiry)."""
        ns, name = self.options.service_namespace, self.options.secret_name
        path = SECRETS.path(ns, name)
        for _ in range(5):
            try:
                secret: dict[str, Any] | None = await self.client.get(path)
            except APIError as err:
                if not err.not_found:
                    raise
                secret = None
            held = _pems_of(secret)
            if held is not None and _still_valid(held["tls.crt"], RENEW_BEFORE):
                return held
            pems = self._new_pems(held["ca.crt"] if held else None)
            data = {k: base64.b64encode(v).decode() for k, v in pems.items()}
            try:
                if secret is None:
                    await self.client.create(SECRETS.path(ns), {
                        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                        "metadata": {"name": name, "namespace": ns, "labels": {
                            "app.kubernetes.io/name": "trainop"}}, "data": data})
                else:  # the resourceVersion makes two renewals at once a 409 for one
                    await self.client.replace(path, {**secret, "data": data})
            except APIError as err:
                if err.conflict:
                    continue  # another replica wrote first: serve theirs
                raise
            log.info("webhook certificates %s in Secret %s/%s (valid %d days)",
                     "renewed" if held else "made", ns, name, CERT_DAYS)
            return pems
        raise APIError(409, {"message": f"Secret {ns}/{name} kept changing"})

    async def _refresh(self) -> None:
        """Serve the shared certificates (or, without the Secret, our own) and publish
        their CA bundle when it changed."""
        try:
            pems = await self._shared_pems()
            self.shared = True
        except REQUEST_ERRORS as err:
            if self.shared or (self.cert.exists() and _still_valid(self.cert.read_bytes(),
                                                                  RENEW_BEFORE)):
                log.warning("webhook certificates: %s; serving the current ones", err)
                return
            log.warning("webhook certificates cannot be shared through Secret %s/%s (%s): "
                        "serving this replica's own; a second replica would serve another "
                        "CA", self.options.service_namespace, self.options.secret_name, err)
            pems = self._new_pems()
        if self._install(pems):
            await self._patch_ca_bundle(pems["ca.crt"])

    async def ensure_certificates(self) -> None:
        """Use mounted certificates, else the shared ones (made when missing), and
        publish their CA."""
        if self.cert.exists() and self.key.exists() and not self.marker.exists():
            self.ctx.load_cert_chain(self.cert, self.key)
            self.ready = True
            log.info("serving certificates from %s", self.options.cert_dir)
            return
        self.self_managed = True
        await self._refresh()
        self.ready = True

    async def rotate_forever(self, every: float = 60) -> None:
        while True:
            await asyncio.sleep(every)
            if not self.self_managed:
                # mounted certificates are renewed by their owner: load what is there now
                self.ctx.load_cert_chain(self.cert, self.key)
                continue
            try:
                await self._refresh()
            except REQUEST_ERRORS as err:  # the CA bundle: published on the next round
                log.warning("webhook certificates: %s; trying again in %.0fs", err, every)

    async def start(self) -> None:
        await self.ensure_certificates()
        limits = listener.ConnectionLimits()
        app = web.Application(client_max_size=limits.max_body)
        for kind in KINDS:
            app.router.add_post(path_for("validate", kind),
                                self._handler(partial(answer, fn=validate_review)))
            app.router.add_post(path_for("mutate", kind),
                                self._handler(partial(answer, fn=default_review)))
        app.router.add_post(CONVERSION_PATH, self._handler(convert_answer))
        self._listener = await listener.serve("webhook", app, self.options.host,
                                              self.options.port, self.ctx, limits)

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
