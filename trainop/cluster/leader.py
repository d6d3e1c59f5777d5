"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection.

Only the leader's controllers act. A leader that cannot renew within the renew deadline
stops acting at once (the manager then exits, to be restarted clean). Leadership is
counted from the start of the last renewal that landed, and `leading` turns False by the
clock alone, even while a slow renewal is still in flight: another manager may take the
lease `lease_duration` after it last saw ours change, and we stop before that.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from trainop import wallclock
from trainop.api.resources import LEASES
from trainop.cluster.options import LeaseTimes
from trainop.cluster.reading.client import REQUEST_ERRORS, APIError, Client

log = logging.getLogger("trainop.leader")


def _micro_now() -> str:
    return wallclock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, client: Client, namespace: str, name: str, identity: str,
                 times: LeaseTimes | None = None):
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.times = times or LeaseTimes()
        self._holding = False
        self.became_leader = asyncio.Event()
        self.lost = asyncio.Event()
        self._observed: tuple[str, str] | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0

    @property
    def leading(self) -> bool:
        """Whether to act now: we hold the lease and renewed it within the deadline."""
        return self._holding and \
            time.monotonic() - self._last_renew < self.times.renew_deadline

    async def _try(self) -> bool:
        """One acquire-or-renew attempt; True when we hold the lease afterwards."""
        path = LEASES.path(self.namespace, self.name)
        now = _micro_now()
        mine = {"holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.times.lease_duration), "renewTime": now}
        try:
            lease: dict[str, Any] = await self.client.get(path)
        except APIError as err:
            if not err.not_found:
                raise
            await self.client.create(LEASES.path(self.namespace), {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {**mine, "acquireTime": now, "leaseTransitions": 0}})
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime") or "")
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        expired = time.monotonic() - self._observed_at > float(
            spec.get("leaseDurationSeconds") or self.times.lease_duration)
        if holder and holder != self.identity and not expired:
            return False
        new_spec = {**spec, **mine}
        if holder != self.identity:
            new_spec["acquireTime"] = now
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        await self.client.replace(path, {**lease, "spec": new_spec})  # resourceVersion guards
        return True

    async def run(self) -> None:
        """Campaign, then renew, until the lease is lost (sets `lost`) or cancelled."""
        while True:
            started = time.monotonic()
            # an attempt may take only what is left of the deadline: a renewal that lands
            # later would be one the other managers no longer wait for
            budget = self.times.renew_deadline - (started - self._last_renew) \
                if self._holding else self.times.renew_deadline
            try:
                held = await asyncio.wait_for(self._try(), max(budget, 0.001))
            except TimeoutError:
                log.warning("lease %s/%s: no answer within %.1fs", self.namespace, self.name,
                            budget)
                held = False
            except REQUEST_ERRORS as err:
                log.warning("lease %s/%s: %s", self.namespace, self.name, err)
                held = False
            if held:
                self._last_renew = started
                if not self._holding:
                    log.info("became leader (lease %s/%s, identity %s)", self.namespace,
                             self.name, self.identity)
                    self._holding = True
                    self.became_leader.set()
            elif self._holding and not self.leading:
                log.error("lost the lease %s/%s: stopping", self.namespace, self.name)
                self._holding = False
                self.lost.set()
                return
            await asyncio.sleep(self.times.retry_period)

    async def release(self) -> None:
        """Give the lease up on a clean shutdown, so that another manager takes over now."""
        if not self.leading:
            return
        self._holding = False
        path = LEASES.path(self.namespace, self.name)
        try:
            lease = await self.client.get(path)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                await self.client.replace(path, lease)
        except REQUEST_ERRORS as err:
            log.warning("lease not released: %s", err)
