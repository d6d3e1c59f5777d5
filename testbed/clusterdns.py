"""Cluster DNS for the test cluster: dnsmasq answering from a hosts file that a watcher keeps
current from the API server's Services and EndpointSlices, as CoreDNS's kubernetes plugin
would (v1 Endpoints are deprecated from Kubernetes 1.33: reading them draws a warning).

Records, in zone `cluster.local`:
- `<svc>.<ns>.svc` -> the Service's cluster IP, or for a headless Service its ready endpoint
  addresses (an endpoint whose readiness is not told counts as ready, as the API says);
- `<hostname>.<svc>.<ns>.svc` -> the endpoint address of a pod whose spec names `hostname`
  and the Service as its `subdomain`.
Other names in the zone get NXDOMAIN; pods reach short names through their search path.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import ssl
import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Getter = Callable[[str], dict[str, Any]]


SERVICE_NAME = "kubernetes.io/service-name"
"""The label that ties an EndpointSlice to its Service."""


def records(services: list[dict[str, Any]], slices: list[dict[str, Any]],
            domain: str = "cluster.local") -> dict[str, list[str]]:
    """Name -> addresses, from Service and EndpointSlice objects."""
    out: dict[str, list[str]] = {}
    headless: set[tuple[str, str]] = set()
    for svc in services:
        meta, spec = svc["metadata"], svc.get("spec", {})
        name = f"{meta['name']}.{meta['namespace']}.svc.{domain}"
        ip = spec.get("clusterIP")
        if ip and ip != "None":
            out[name] = [ip]
        else:
            headless.add((meta["namespace"], meta["name"]))
    for eps in slices:
        meta = eps["metadata"]
        service = (meta.get("labels") or {}).get(SERVICE_NAME)
        if (meta["namespace"], service) not in headless:
            continue
        base = f"{service}.{meta['namespace']}.svc.{domain}"
        for endpoint in eps.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            for ip in endpoint.get("addresses") or []:
                out.setdefault(base, []).append(ip)
                if endpoint.get("hostname"):
                    out.setdefault(f"{endpoint['hostname']}.{base}", []).append(ip)
    return out


def hosts_file(recs: dict[str, list[str]]) -> str:
    return "".join(f"{ip} {name}\n" for name in sorted(recs) for ip in recs[name])


def api_getter(url: str, token: str, ca_file: Path) -> Getter:
    ctx = ssl.create_default_context(cafile=str(ca_file))

    def get(path: str) -> dict[str, Any]:
        req = urllib.request.Request(f"{url}{path}",
                                     headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
            return dict(json.loads(resp.read()))
    return get


class DNSWatcher(threading.Thread):
    """Rewrites `hosts` whenever the records change and tells dnsmasq (SIGHUP)."""

    def __init__(self, get: Getter, hosts: Path, dnsmasq_pid: Callable[[], int | None],
                 interval: float = 0.25) -> None:
        super().__init__(name="cluster-dns", daemon=True)
        self.get, self.hosts, self.dnsmasq_pid = get, hosts, dnsmasq_pid
        self.interval = interval
        self.stopping = threading.Event()

    def sync(self) -> bool:
        """One pass; True when the hosts file changed."""
        services = self.get("/api/v1/services")["items"]
        slices = self.get("/apis/discovery.k8s.io/v1/endpointslices")["items"]
        text = hosts_file(records(services, slices))
        if self.hosts.exists() and self.hosts.read_text() == text:
            return False
        tmp = self.hosts.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(self.hosts)
        pid = self.dnsmasq_pid()
        if pid:
            os.kill(pid, signal.SIGHUP)
        return True

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.sync()
            except Exception as err:  # the API server restarts in some tests: keep going
                log.debug("cluster DNS: %s", err)
            self.stopping.wait(self.interval)

    def stop(self) -> None:
        self.stopping.set()
        self.join(5)
