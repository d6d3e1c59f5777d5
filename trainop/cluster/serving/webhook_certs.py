"""The webhook's certificates: mounted ones served as they are (and loaded again as their
owner renews them), or trainop's own, made, kept in one Secret every replica shares,
renewed before they expire, and their CA given to the webhook configurations and to the
CRDs' conversion webhooks."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import ssl
from pathlib import Path
from typing import Any

from trainop import wallclock
from trainop.api.kinds import GROUP, KINDS, OTHER_VERSIONS
from trainop.api.resources import CRDS, SECRETS
from trainop.cluster.options import WebhookOptions
from trainop.cluster.reading.client import REQUEST_ERRORS, APIError, Client
from trainop.cluster.serving.certs import ca_and_serving_cert, not_after

log = logging.getLogger("trainop.webhook")

RENEW_BEFORE = dt.timedelta(days=2)
CERT_DAYS = 7
CONFIG_KINDS = (("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations"),
                ("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations"))


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


class WebhookCertificates:
    """The certificates the webhook serves, in `ctx`."""

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

    async def ensure(self) -> None:
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
