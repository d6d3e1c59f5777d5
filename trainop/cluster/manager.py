"""`trainop manager`: one process, one shared cache, one controller per enabled kind."""

from __future__ import annotations

import asyncio
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
    GANG_PODGROUPS,
    GANG_WORKLOADS,
    NAMESPACES,
    NODES,
    PLUGINS_PODGROUPS,
    PODS,
    SECRETS,
    VOLCANO_PODGROUPS,
    WORKLOADS,
    Resource,
    job_resource,
)
from trainop.cluster import allocator, parts
from trainop.cluster.acting import kueue
from trainop.cluster.acting.controller import ControllerConfig, JobController, ParsedJobs
from trainop.cluster.acting.events import EventRecorder
from trainop.cluster.acting.rank_channels import RankChannels
from trainop.cluster.leader import LeaderElector
from trainop.cluster.options import ManagerOptions
from trainop.cluster.parts import Components
from trainop.cluster.reading import caches as caches_mod
from trainop.cluster.reading import config as cluster_config
from trainop.cluster.reading import gang_api
from trainop.cluster.reading.client import APIError, Client
from trainop.cluster.reading.informer import Informer, wait_synced
from trainop.cluster.reading.kueue_caches import KueueCaches
from trainop.cluster.reading.reports import HeardReports
from trainop.cluster.serving import server
from trainop.cluster.serving.authn import TokenAuthorizer
from trainop.cluster.serving.progress_server import ProgressServer
from trainop.cluster.serving.webhook import WebhookServer
from trainop.engine import EngineConfig, inplace

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
    if opts.engine.workload_api:
        try:
            if await gang_api.served(client):
                extra.update({r.kind: r for r in (GANG_WORKLOADS, GANG_PODGROUPS)})
        except APIError as err:
            raise StartupError(f"cannot read the API of {GANG_WORKLOADS.api_version}: {err}"
                               ) from None
    elif gang_scheduler:
        group = VOLCANO_PODGROUPS if gang_scheduler == "volcano" else PLUGINS_PODGROUPS
        try:
            await client.get(f"/apis/{group.group}/{group.version}")
        except APIError:
            raise StartupError(f"--gang-scheduler-name={gang_scheduler} needs the PodGroup "
                               f"CRD {group.plural}.{group.group} ({group.api_version}), "
                               "which is not installed") from None
        extra["PodGroup"] = group
    if opts.engine.rank_supervisor_image is not None:
        extra[SECRETS.kind] = SECRETS  # the keys of jobs whose ranks run under it
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
    api = WORKLOADS
    try:
        await client.get(f"/apis/{api.group}/{api.version}")
    except APIError as err:
        if not err.not_found:
            raise StartupError(f"cannot read Kueue's API {api.api_version}: {err}") from None
        log.warning("Kueue's Workload API (%s) is not served: jobs of %s are not queued "
                    "(--kueue-workloads)", api.api_version, ", ".join(queued))
        return None
    if opts.kueue_namespace_selector:
        try:
            await client.get(NAMESPACES.path(), {
                "labelSelector": opts.kueue_namespace_selector, "limit": "1"})
        except APIError as err:
            raise StartupError(f"--kueue-managed-jobs-namespace-selector "
                               f"{opts.kueue_namespace_selector!r}: {err}") from None
    log.info("keeping Kueue Workloads for queued jobs of %s%s (in namespaces %s)",
             ", ".join(queued), ", those naming no queue too" if
             opts.kueue_without_queue_name else "", opts.kueue_namespace_selector or "all")
    caches = KueueCaches(client, opts.namespace, opts.kueue_namespace_selector or None)
    return kueue.Queueing(client, caches, recorder,
                          without_queue_name=opts.kueue_without_queue_name)


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
        if self.webhook is not None and not self.webhook.certificates.ready:
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
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    given = await parts.start_all(_Starting(opts, cfg, components).parts(), stop)
    if given is None:  # told to stop before it led
        return 0
    elector: LeaderElector | None = given["lease"]
    await _first(stop.wait(), *([elector.lost.wait()] if elector else []))
    if elector is not None and elector.lost.is_set():
        return 1
    log.info("stopping")
    return 0


class _Starting:
    """The manager's parts and what each needs (parts.start_all orders them): the API
    client first; the probes before the webhook serves (the kubelet asks them while the
    webhook's certificates are made); the jobs listed once the webhook serves (a job
    stored at another version is read through its conversion); the informers before the
    lease (as controller-runtime: a new leader's caches are warm); the controllers last,
    once the lease is held."""

    def __init__(self, opts: ManagerOptions, cfg: cluster_config.ClusterConfig,
                 components: Components):
        self.opts, self.cfg, self.components = opts, cfg, components

    def parts(self) -> list[parts.Part]:
        return [
            parts.Part("client", (), self.client),
            parts.Part("recorder", ("client",), self.recorder),
            parts.Part("metrics", ("client",), self.metrics),
            parts.Part("progress server", ("client",), self.progress_server),
            parts.Part("webhook", ("client", "progress server"), self.webhook),
            parts.Part("probes", ("webhook",), self.probes),
            parts.Part("webhook serving", ("webhook", "probes"), self.webhook_serving),
            parts.Part("discovery", ("client", "webhook serving"), self.discovery),
            parts.Part("engine", ("client", "discovery"), self.engine),
            parts.Part("caches", ("client", "discovery"), self.caches),
            parts.Part("queueing", ("client", "recorder"), self.queueing),
            parts.Part("informers", ("caches", "queueing", "probes"), self.informers),
            parts.Part("lease", ("informers",), self.lease),
            parts.Part("rank channels", (), self.rank_channels),
            parts.Part("controllers", ("lease", "engine", "caches", "queueing", "recorder",
                                       "rank channels", "progress server"), self.controllers),
        ]

    async def client(self, _: dict[str, Any]) -> Client:
        client = Client(self.cfg, qps=self.opts.qps, burst=self.opts.burst)
        self.components.started("API client", client.close)
        await _reach(client)
        return client

    async def recorder(self, given: dict[str, Any]) -> EventRecorder:
        recorder = EventRecorder(given["client"])
        self.components.started("event recorder", recorder.drain)
        return recorder

    async def metrics(self, _: dict[str, Any]) -> None:
        await _serve_metrics(self.opts, self.cfg, self.components)

    async def progress_server(self, given: dict[str, Any]) -> ProgressServer | None:
        """The progress route's handler (--progress-server), served beside the webhook."""
        if not self.opts.progress_server:
            return None
        if self.opts.webhook is None:
            raise StartupError("--progress-server serves beside the webhook: it needs "
                               "--webhook-server-port")
        return ProgressServer(given["client"],
                              HeardReports(self.opts.webhook.cert_dir / "ca.crt"))

    async def webhook(self, given: dict[str, Any]) -> WebhookServer | None:
        progress: ProgressServer | None = given["progress server"]
        return WebhookServer(given["client"], self.opts.webhook,
                             progress.routes if progress is not None else None) \
            if self.opts.webhook is not None else None

    async def probes(self, given: dict[str, Any]) -> Probes:
        probes = Probes(given["webhook"])
        served = await server.start(self.opts.health_address, {
            "/healthz": probes.healthy, "/readyz": probes.ready}, name="probes")
        if served is not None:
            self.components.started("probes", served.cleanup)
        return probes

    async def webhook_serving(self, given: dict[str, Any]) -> None:
        webhook: WebhookServer | None = given["webhook"]
        if webhook is not None:
            await webhook.start()
            self.components.started("webhook", webhook.stop)
            self.components.task("webhook certificate rotation",
                                 webhook.certificates.rotate_forever())

    async def discovery(self, given: dict[str, Any]) -> dict[str, Resource]:
        return await _discover(given["client"], self.opts)

    async def engine(self, given: dict[str, Any]) -> EngineConfig:
        """The engine's options, with what of them the cluster cannot do (Kubernetes' own
        gang, restarts in place: each said as the manager starts)."""
        engine = await gang_api.configure(
            given["client"], self.opts.engine, GANG_WORKLOADS.kind in given["discovery"],
            self.opts.namespace)
        if self.opts.progress_server and self.opts.webhook is not None:
            hook = self.opts.webhook
            engine = dataclasses.replace(engine, progress_server=(
                f"https://{hook.service_name}.{hook.service_namespace}.svc"))
        if (why := await _in_place(given["client"], self.opts)) is None:
            return engine
        log.log(logging.WARNING if engine.restart_in_place else logging.INFO,
                "%s: jobs restart by making their pods again", why)
        return dataclasses.replace(engine, in_place_unavailable=why)

    async def caches(self, given: dict[str, Any]) -> caches_mod.Caches:
        return caches_mod.build(given["client"], self.opts.kinds, self.opts.namespace,
                                given["discovery"],
                                nodes=self.opts.engine.lost_node_grace is not None)

    async def queueing(self, given: dict[str, Any]) -> kueue.Queueing | None:
        return await _queueing(given["client"], self.opts, given["recorder"])

    async def informers(self, given: dict[str, Any]) -> None:
        caches: caches_mod.Caches = given["caches"]
        queueing: kueue.Queueing | None = given["queueing"]
        for informer in [*caches.all(), *(queueing.caches.all() if queueing else [])]:
            given["probes"].informers[informer.resource.plural] = self.components.task(
                f"{informer.resource.plural} informer", informer.run())
        self.components.task("cache sync", _log_synced(caches, self.opts, given["probes"]))

    async def lease(self, _: dict[str, Any]) -> LeaderElector | None:
        """The elector, once it leads; None where the manager runs alone."""
        elector = _elector(self.opts, self.cfg, self.components)
        if elector is not None:
            self.components.started("lease", elector.release)
            self.components.task("leader election", elector.run())
            log.info("waiting for the lease %s/%s", elector.namespace, elector.name)
            await elector.became_leader.wait()
        return elector

    async def rank_channels(self, _: dict[str, Any]) -> RankChannels | None:
        """The jobs' rank supervisors, followed where pods run under them."""
        if self.opts.engine.rank_supervisor_image is None:
            return None
        ranks = RankChannels()
        self.components.started("rank channels", ranks.close)
        return ranks

    async def controllers(self, given: dict[str, Any]) -> None:
        """One controller per kind, each started once its own caches are (a kind whose
        jobs cannot be listed holds up no other)."""
        elector: LeaderElector | None = given["lease"]
        leading = (lambda: elector.leading) if elector else (lambda: True)
        caches: caches_mod.Caches = given["caches"]
        queueing: kueue.Queueing | None = given["queueing"]
        config = ControllerConfig(given["engine"], self.opts.threads, self.opts.cluster_domain)
        progress: ProgressServer | None = given["progress server"]
        if progress is not None:
            progress.attach(caches)
        parsed = ParsedJobs()  # one budget for every kind's parsed jobs
        for kind in self.opts.kinds:
            queued = queueing if kind in self.opts.kueue_kinds else None
            controller = JobController(kind, given["client"], caches, config,
                                       given["recorder"], leading, parsed, queued,
                                       given["rank channels"],
                                       progress.heard if progress is not None else None)
            self.components.task(f"{kind} controller", _when_synced(
                [caches.jobs[kind], *caches.shared(),
                 *(queued.caches.all() if queued else [])], controller.run))


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
