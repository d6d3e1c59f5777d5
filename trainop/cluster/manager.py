"""`trainop manager`: one process, one shared cache, one controller per enabled kind."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from trainop.api import KINDS, templates
from trainop.api.resources import (
    NODES,
    PLUGINS_PODGROUPS,
    PODS,
    VOLCANO_PODGROUPS,
    Resource,
    job_resource,
)
from trainop.cluster import allocator
from trainop.cluster.acting import kueue
from trainop.cluster.acting.controller import ControllerConfig, JobController, ParsedJobs
from trainop.cluster.acting.events import EventRecorder
from trainop.cluster.leader import LeaderElector
from trainop.cluster.options import ManagerOptions
from trainop.cluster.reading import caches as caches_mod
from trainop.cluster.reading import config as cluster_config
from trainop.cluster.reading.client import APIError, Client
from trainop.cluster.reading.informer import Informer, wait_synced
from trainop.cluster.serving import server
from trainop.cluster.serving.authn import TokenAuthorizer
from trainop.cluster.serving.webhook import WebhookServer
from trainop.engine import inplace

log = logging.getLogger("trainop.manager")


class StartupError(RuntimeError):
    """The manager cannot start; the message is the one line the user sees."""


async def _reach(client: Client) -> None:
    """Check the API server answers."""
    try:
        await client.get("/version")
    except (aiohttp.ClientError, OSError, TimeoutError) as err:
        raise StartupError(f"cannot reach the API server at {client.config.server}: "
                           f"{err or type(err).__name__}") from None
    except APIError as err:
        raise StartupError(f"the API server at {client.config.server} refused us: {err}") \
            from None


async def _discover(client: Client, opts: ManagerOptions) -> dict[str, Resource]:
    """Check the cluster has what the options need; the extra informers they call for.
    (After the webhook serves: listing jobs stored at another version than v1 goes
    through its conversion.)"""
    for kind in opts.kinds:
        path = job_resource(kind).path(opts.namespace)
        try:
            await client.get(path, {"limit": "1"})
        except APIError as err:
            if err.not_found:
                raise StartupError(
                    f"the CRD {KINDS[kind].plural}.kubeflow.org is not installed: install the "
                    f"CRDs (trainop crds | kubectl apply --server-side -f -) or leave {kind} "
                    f"out of --enable-scheme") from None
            raise StartupError(f"cannot list {KINDS[kind].plural}: {err}") from None
    extra: dict[str, Resource] = {}
    gang_scheduler = opts.engine.gang_scheduler
    if gang_scheduler:
        group = VOLCANO_PODGROUPS if gang_scheduler == "volcano" else PLUGINS_PODGROUPS
        try:
            await client.get(f"/apis/{group.group}/{group.version}")
        except APIError:
            raise StartupError(f"--gang-scheduler-name={gang_scheduler} needs the PodGroup "
                               f"CRD {group.plural}.{group.group} ({group.api_version}), "
                               "which is not installed") from None
        extra["PodGroup"] = group
    if opts.engine.lost_node_grace is not None:
        try:
            await client.get(NODES.path(), {"limit": "1"})
        except APIError as err:
            raise StartupError(f"--lost-node-grace needs to list and watch nodes: {err}"
                               ) from None
    return extra


async def _in_place(client: Client, opts: ManagerOptions) -> str | None:
    """Why the cluster cannot restart pods in place (None where it can): the API server's
    answer to a pod with the agent and its rule, created with dryRun."""
    namespace = opts.namespace or "default"
    try:
        made = await client.request("POST", PODS.path(namespace),
                                    inplace.probe_pod(opts.engine), {"dryRun": "All"})
    except APIError as err:
        if err.status == 422 and "RestartAllContainers" in err.message:
            return inplace.REFUSED
        log.warning("cannot tell whether the cluster restarts pods in place (a pod created "
                    "with dryRun in %s: %s): taking it that it does", namespace, err)
        return None
    agent = templates.container(made, inplace.AGENT) or {}
    return None if agent.get("restartPolicyRules") else inplace.DROPPED


async def _queueing(client: Client, opts: ManagerOptions, recorder: EventRecorder
                    ) -> kueue.Queueing | None:
    """Kueue's part (--kueue-workloads), where Kueue's Workload API is served; said once
    where it is not: the jobs then run as without Kueue."""
    queued = [k for k in opts.kueue_kinds if k in opts.kinds]
    if not queued:
        return None
    api = kueue.WORKLOADS
    try:
        await client.get(f"/apis/{api.group}/{api.version}")
    except APIError as err:
        if not err.not_found:
            raise StartupError(f"cannot read Kueue's API {api.api_version}: {err}") from None
        log.warning("Kueue's Workload API (%s) is not served: jobs of %s are not queued "
                    "(--kueue-workloads)", api.api_version, ", ".join(queued))
        return None
    workloads, flavors = kueue.informers(client, opts.namespace)
    namespaces = None
    if opts.kueue_namespace_selector:
        try:
            await client.get(kueue.NAMESPACES.path(), {
                "labelSelector": opts.kueue_namespace_selector, "limit": "1"})
        except APIError as err:
            raise StartupError(f"--kueue-managed-jobs-namespace-selector "
                               f"{opts.kueue_namespace_selector!r}: {err}") from None
        namespaces = kueue.managed_namespaces(client, opts.kueue_namespace_selector)
    log.info("keeping Kueue Workloads for queued jobs of %s%s (in namespaces %s)",
             ", ".join(queued), ", those naming no queue too" if
             opts.kueue_without_queue_name else "", opts.kueue_namespace_selector or "all")
    return kueue.Queueing(client, workloads, flavors, recorder, namespaces=namespaces,
                          without_queue_name=opts.kueue_without_queue_name)


class Components:
    """What the manager started, in order; stopped in the reverse order (as
    controller-runtime stops its Runnables): the controllers before the lease they hold,
    the informers before the webhook, the event recorder and the clients last."""

    def __init__(self) -> None:
        self._stops: list[tuple[str, Callable[[], Awaitable[object]]]] = []

    def started(self, name: str, stop: Callable[[], Awaitable[object]]) -> None:
        """`name` is running; `stop` ends it."""
        self._stops.append((name, stop))

    def task(self, name: str, work: Awaitable[object]) -> asyncio.Task[object]:
        """Run `work` as a task until the manager stops."""
        task = asyncio.ensure_future(work)
        self.started(name, lambda: _cancel(task))
        return task

    async def stop(self) -> None:
        while self._stops:
            name, stop = self._stops.pop()
            try:
                await stop()
            except Exception:
                log.exception("stopping %s", name)


class Probes:
    """/healthz and /readyz: ready once the caches have synced (and the webhook has its
    certificates); unhealthy once an informer has ended."""

    def __init__(self, webhook: WebhookServer | None):
        self.webhook = webhook
        self.synced = False
        self.informers: dict[str, asyncio.Task[object]] = {}

    def ready(self) -> tuple[int, str, str]:
        if not self.synced:
            return 500, "text/plain", "caches syncing"
        if self.webhook is not None and not self.webhook.ready:
            return 500, "text/plain", "webhook certificates not ready"
        return 200, "text/plain", "ok"

    def healthy(self) -> tuple[int, str, str]:
        # an informer never ends on its own: one that did leaves a cache that no longer
        # changes, and only a restart mends that
        stopped = [name for name, task in self.informers.items() if task.done()]
        if stopped:
            return 500, "text/plain", f"informers stopped: {', '.join(stopped)}"
        return 200, "text/plain", "ok"


async def run_manager(opts: ManagerOptions) -> int:
    """Run until SIGINT or SIGTERM (0) or a lost lease (1)."""
    try:
        cfg = cluster_config.load(opts.kubeconfig)
    except cluster_config.ConfigError as err:
        raise StartupError(str(err)) from None
    allocator.pin_mmap_threshold()
    components = Components()
    try:
        return await _run(opts, cfg, components)
    finally:
        await components.stop()


async def _run(opts: ManagerOptions, cfg: cluster_config.ClusterConfig,
               components: Components) -> int:
    client = Client(cfg, qps=opts.qps, burst=opts.burst)
    components.started("API client", client.close)
    recorder = EventRecorder(client)
    components.started("event recorder", recorder.drain)
    await _reach(client)
    webhook = WebhookServer(client, opts.webhook) if opts.webhook is not None else None
    probes = Probes(webhook)
    await _serve_metrics(opts, cfg, components)
    probes_server = await server.start(opts.health_address, {
        "/healthz": probes.healthy, "/readyz": probes.ready}, name="probes")
    if probes_server is not None:
        components.started("probes", probes_server.cleanup)
    if webhook is not None:
        await webhook.start()
        components.started("webhook", webhook.stop)
        components.task("webhook certificate rotation", webhook.rotate_forever())
    extra = await _discover(client, opts)
    if (why := await _in_place(client, opts)) is not None:
        # (said as a warning where the manager's flag asks for restarts in place)
        log.log(logging.WARNING if opts.engine.restart_in_place else logging.INFO,
                "%s: jobs restart by making their pods again", why)
        opts = dataclasses.replace(opts, engine=dataclasses.replace(
            opts.engine, in_place_unavailable=why))
    caches = caches_mod.build(client, opts.kinds, opts.namespace, extra,
                              nodes=opts.engine.lost_node_grace is not None)
    queueing = await _queueing(client, opts, recorder)
    kueue_informers = queueing.informers() if queueing else []
    for informer in [*caches.all(), *kueue_informers]:
        probes.informers[informer.resource.plural] = components.task(
            f"{informer.resource.plural} informer", informer.run())
    components.task("cache sync", _log_synced(caches, opts, probes))

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    elector = _elector(opts, cfg, components)
    if elector is not None:
        components.started("lease", elector.release)
        components.task("leader election", elector.run())
        log.info("waiting for the lease %s/%s", elector.namespace, elector.name)
        await _first(elector.became_leader.wait(), stop.wait())
        if stop.is_set():
            return 0
    leading = (lambda: elector.leading) if elector else (lambda: True)
    config = ControllerConfig(opts.engine, opts.threads, opts.cluster_domain)
    parsed = ParsedJobs()  # one budget for every kind's parsed jobs
    for kind in opts.kinds:
        queued = queueing if kind in opts.kueue_kinds else None
        controller = JobController(kind, client, caches, config, recorder, leading, parsed,
                                   queued)
        # each kind starts once its own caches are: a kind whose jobs cannot be listed
        # holds up no other
        components.task(f"{kind} controller", _when_synced(
            [caches.jobs[kind], *caches.shared(), *(kueue_informers if queued else [])],
            controller.run))
    await _first(stop.wait(), *([elector.lost.wait()] if elector else []))
    if elector is not None and elector.lost.is_set():
        return 1
    log.info("stopping")
    return 0


async def _log_synced(caches: caches_mod.Caches, opts: ManagerOptions, probes: Probes) -> None:
    await wait_synced(caches.all())
    probes.synced = True
    log.info("caches synced: %s; controllers for %s%s", ", ".join(
        i.resource.plural for i in caches.all()), ", ".join(opts.kinds),
        f" in namespace {opts.namespace}" if opts.namespace else "")


def _elector(opts: ManagerOptions, cfg: cluster_config.ClusterConfig,
             components: Components) -> LeaderElector | None:
    if not opts.leader_elect:
        return None
    # its own connections and no shared rate limit: no burst of other requests may delay
    # a renewal
    elector_client = Client(cfg, max_connections=2)
    components.started("lease client", elector_client.close)
    return LeaderElector(elector_client, opts.leader_election_namespace or cfg.namespace,
                         opts.leader_election_id,
                         f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}", opts.lease)


async def _serve_metrics(opts: ManagerOptions, cfg: cluster_config.ClusterConfig,
                         components: Components) -> None:
    """/metrics at its address: plain HTTP, or (--metrics-secure) TLS for the callers the
    API server authenticates and authorizes."""
    if not opts.metrics_secure:
        served = await server.start(opts.metrics_address, {"/metrics": server.metrics_body},
                                    name="metrics")
    else:
        # reviews of scrapers' tokens have their own small budget: a flood of unknown
        # tokens must not take the requests the controllers and the lease need
        authn_client = Client(cfg, qps=5, burst=10, max_connections=4)
        components.started("token review client", authn_client.close)
        served = await server.start(
            opts.metrics_address, {"/metrics": server.metrics_body},
            ssl_context=server.self_signed_context(),
            authorize=TokenAuthorizer(authn_client).check, name="metrics")
    if served is not None:
        components.started("metrics", served.cleanup)


async def _when_synced(informers: list[Informer[Any]],
                       then: Callable[[], Awaitable[object]]) -> None:
    await wait_synced(informers)
    await then()


async def _cancel(task: asyncio.Task[object]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def _first(*aws: Awaitable[object]) -> None:
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()


def configure_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
