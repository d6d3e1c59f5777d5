"""The manager's side of its jobs' rank supervisors (engine/supervised.py): one long poll
per supervised pod, what each supervisor last said (for the engine to read: the
Observer's overlay), and the job's attempts told to each as soon as the engine decides
them, again until it has them.

A supervisor that cannot be reached is said nothing of: the engine reads its pod as the
kubelet shows it, and the supervisor, unheard past its lease, leaves the restart to the
kubelet's path. Its poll is tried again, ever more slowly (at most every RETRY_MOST s).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp

from trainop.api.resources import SECRETS
from trainop.api.types import Defaulted
from trainop.cluster.acting.ranks import KEY_BYTES, ChannelError, Supervisor
from trainop.cluster.reading.client import APIError, Client
from trainop.cluster.reading.records import PodRecord
from trainop.engine import supervised
from trainop.engine.observed import RankState, Told
from trainop.engine.plan import Plan

log = logging.getLogger(__name__)

WAIT = 5.0
"""Seconds a supervisor holds a poll open: each poll renews the manager's lease there
(15 s), and a poll that ends brings the next at once."""
RETRY_FIRST, RETRY_MOST = 0.5, 5.0
UNREACHED_AFTER = 3
"""Failed polls in a row, with none ever answered, after which a pod's supervisor is one
the manager cannot reach (said once per job: unreached)."""
CONNECTIONS = 4096
"""Connections open at once, to every supervisor followed (one poll, one tell each):
beyond it, a poll waits for a free one."""


@dataclass(frozen=True)
class Target:
    """A pod to follow: its UID, name, where its supervisor serves, and what the job's
    attempts are as the pod is to be told them."""

    uid: str
    name: str
    address: str
    told: Told


@dataclass
class _Pod:
    target: Target
    key: bytes
    state: RankState | None = None
    sent: Told | None = None
    """What its supervisor said it was told last (its answer to a tell or a poll)."""
    polling: asyncio.Task[None] | None = None
    telling: asyncio.Task[None] | None = None
    failures: int = 0
    """Polls failed in a row."""
    reached: bool = False


def _newer(told: Told, than: Told | None) -> bool:
    """Whether `told` is newer than `than`, as the supervisor orders tells."""
    return than is None or (told.attempt, told.released, told.finish) > (
        than.attempt, than.released, than.finish)


class RankChannels:
    """Every job's followed supervisors, by job key then pod UID."""

    def __init__(self, connections: int = CONNECTIONS) -> None:
        self.connections = connections
        self._session: aiohttp.ClientSession | None = None
        self._jobs: dict[str, dict[str, _Pod]] = {}
        self._keys: dict[str, tuple[str, bytes]] = {}
        """Each job's key, with the job's UID it was read for."""
        self._said: set[str] = set()
        """The jobs told that their supervisors cannot be reached."""

    def states(self, job: str) -> dict[str, RankState]:
        """What each followed pod's supervisor said last, by pod UID."""
        return {uid: pod.state for uid, pod in self._jobs.get(job, {}).items()
                if pod.state is not None}

    def follows(self, job: str, uid: str) -> bool:
        """Whether the job's pod of `uid` is followed."""
        return uid in self._jobs.get(job, {})

    def unreached(self, job: str) -> list[str]:
        """The pods of the job whose supervisors none of UNREACHED_AFTER polls reached,
        the first time any are (then never again for the job: said once)."""
        if job in self._said:
            return []
        pods = sorted(p.target.name for p in self._jobs.get(job, {}).values()
                      if not p.reached and p.failures >= UNREACHED_AFTER)
        if pods:
            self._said.add(job)
        return pods

    async def key(self, client: Client, job: str, namespace: str, name: str, uid: str
                  ) -> bytes | None:
        """The job's key, from its Secret (read once per job): None where there is none
        yet, or the Secret there is not the job's own or holds no key."""
        known = self._keys.get(job)
        if known is not None and known[0] == uid and known[1]:
            return known[1]
        secret = supervised.key_secret(name)
        # a list by name: the manager's role lists Secrets, and gets none it was not given
        found = await client.get(SECRETS.path(namespace),
                                 {"fieldSelector": f"metadata.name={secret}"})
        there = (found.get("items") or [None])[0]
        if there is None:
            return None
        owners = (there.get("metadata") or {}).get("ownerReferences") or []
        text = (there.get("data") or {}).get(supervised.KEY)
        raw = None
        if any(isinstance(o, dict) and o.get("uid") == uid and o.get("controller") is True
               for o in owners) and type(text) is str:
            try:
                raw = _decoded(base64.b64decode(text, validate=True).decode("ascii"))
            except (binascii.Error, UnicodeDecodeError):
                raw = None
        if raw is None:
            if self._keys.get(job) != (uid, b""):  # said once per job
                log.warning("Secret %s/%s is not the job's own or holds no key: the ranks of "
                            "job %s restart by the kubelet's path", namespace, secret, job)
                self._keys[job] = (uid, b"")
            return None
        self._keys[job] = (uid, raw)
        return raw

    def follow(self, job: str, key: bytes, targets: list[Target],
               wake: Callable[[], None]) -> None:
        """Follow exactly `targets` of the job: poll those new, stop those gone, and tell
        each what it is to be told where its supervisor has not said it has that."""
        pods = self._jobs.setdefault(job, {})
        wanted = {t.uid: t for t in targets}
        for uid in [u for u in pods if u not in wanted]:
            self._stop(pods.pop(uid))
        for uid, target in wanted.items():
            pod = pods.get(uid)
            if pod is None or pod.key != key or pod.target.address != target.address:
                if pod is not None:
                    self._stop(pod)
                pod = pods[uid] = _Pod(target, key)
                pod.polling = asyncio.create_task(self._poll(pod, wake))
            else:
                pod.target = target
            if _newer(target.told, pod.sent) and (pod.telling is None or pod.telling.done()):
                pod.telling = asyncio.create_task(self._tell(pod, wake))
        if not pods:
            self._jobs.pop(job, None)

    def forget(self, job: str) -> None:
        """A job gone or over: its supervisors followed no more."""
        for pod in self._jobs.pop(job, {}).values():
            self._stop(pod)
        self._keys.pop(job, None)
        self._said.discard(job)

    async def close(self) -> None:
        tasks = [t for pods in self._jobs.values() for pod in pods.values()
                 for t in (pod.polling, pod.telling) if t is not None]
        for job in list(self._jobs):
            self.forget(job)
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        if self._session is not None:
            await self._session.close()

    # -- one pod --------------------------------------------------------------------------
    def _supervisor(self, pod: _Pod) -> Supervisor:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.connections),
                timeout=aiohttp.ClientTimeout(total=WAIT + 10, sock_connect=3))
        return Supervisor(self._session, pod.target.address, pod.target.name, pod.key)

    async def _poll(self, pod: _Pod, wake: Callable[[], None]) -> None:
        sup = self._supervisor(pod)
        while True:
            try:
                state = await sup.state(after=pod.state.seq if pod.state else 0, wait=WAIT)
            except ChannelError as err:
                pod.failures += 1
                if pod.failures == 1:
                    log.info("rank supervisor of pod %s at %s: %s", pod.target.name,
                             pod.target.address, err)
                if pod.state is not None:
                    pod.state = None  # its pod is read as the kubelet shows it
                    wake()
                elif pod.failures == UNREACHED_AFTER and not pod.reached:
                    wake()  # the job is told
                await asyncio.sleep(min(RETRY_MOST, RETRY_FIRST * 2 ** min(pod.failures, 8)))
                continue
            pod.failures, pod.reached = 0, True
            self._heard(pod, state, wake)

    async def _tell(self, pod: _Pod, wake: Callable[[], None]) -> None:
        """Tell the pod's supervisor what it is to be told, until it says it has it (a
        newer word while a tell is under way is told next)."""
        sup = self._supervisor(pod)
        failures = 0
        while _newer(told := pod.target.told, pod.sent):
            try:
                state = await sup.tell(told)
            except ChannelError:
                failures += 1
                await asyncio.sleep(min(RETRY_MOST, RETRY_FIRST * 2 ** min(failures, 8)))
                continue
            self._heard(pod, state, wake)

    @staticmethod
    def _heard(pod: _Pod, state: RankState, wake: Callable[[], None]) -> None:
        if _newer(state.told, pod.sent):
            pod.sent = state.told
        if pod.state is None or state.seq > pod.state.seq:
            pod.state = state
            wake()

    @staticmethod
    def _stop(pod: _Pod) -> None:
        for task in (pod.polling, pod.telling):
            if task is not None:
                task.cancel()


async def follow_job(ranks: RankChannels, client: Client, job: Defaulted,
                     pods: list[PodRecord], plan: Plan, wake: Callable[[], None]) -> None:
    """Before a job's round is carried out: follow the supervisors of its pods that can
    still restart in place, each told what the round tells its pod (plan.told; else what
    its annotations say) before its annotations change, so that its agent never sees a
    newer attempt first. A pod is followed from the moment it is Ready (its supervisor serves
    then: none is taken for one that cannot be reached while it starts)."""
    live = [p for p in pods if p.channel is not None and not p.terminating
            and p.in_place is not None and p.in_place.alive
            and (p.ready or ranks.follows(job.key, p.meta.uid))]
    if not live:
        ranks.forget(job.key)
        return
    try:
        key = await ranks.key(client, job.key, job.namespace, job.name, job.metadata.uid or "")
    except APIError as err:
        log.warning("cannot read the key of job %s's rank supervisors: %s", job.key, err)
        return
    if key is None:
        return
    ranks.follow(job.key, key, [
        Target(p.meta.uid, p.meta.name, p.channel, plan.told.get(p.meta.name) or Told(
            p.in_place.attempt, p.in_place.released, p.in_place.finish))
        for p in live if p.channel is not None and p.in_place is not None], wake)


def _decoded(key: str) -> bytes | None:
    """A key as KEY_ENV holds it (base64url, unpadded), as bytes; None where it is not."""
    with contextlib.suppress(binascii.Error, ValueError):
        raw = base64.urlsafe_b64decode(key + "=" * (-len(key) % 4))
        if len(raw) >= KEY_BYTES and base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == key:
            return raw
    return None
