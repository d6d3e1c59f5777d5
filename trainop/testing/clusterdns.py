"""Cluster DNS for the test cluster: dnsmasq answering from a hosts file that a watcher keeps
current from the API server's Services and Endpoints, as CoreDNS's kubernetes plugin would.

Records, in zone `cluster.local`:
- `<svc>.<ns>.svc` -> the Service's cluster IP, or for a headless Service its ready endpoint
  addresses;
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


def records(services: list[dict[str, Any]], endpoints: list[dict[str, Any]],
            domain: str = "cluster.local") -> dict[str, list[str]]:
    """Name -> addresses, from Service and Endpoints objects."""
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
    for ep in endpoints:
        meta = ep["metadata"]
        if (meta["namespace"], meta["name"]) not in headless:
            continue
        base = f"{meta['name']}.{meta['namespace']}.svc.{domain}"
        for subset in ep.get("subsets") or []:
            for addr in subset.get("addresses") or []:
                out.setdefault(base, []).append(addr["ip"])
                if addr.get("hostname"):
                    out.setdefault(f"{addr['hostname']}.{base}", []).append(addr["ip"])
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
        endpoints = self.get("/api/v1/endpoints")["items"]
        text = hosts_file(records(services, endpoints))
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
