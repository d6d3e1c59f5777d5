"""The flags of `trainop manager`, each declared once: its names, its help, and the field of
ManagerOptions it fills (a dotted path, the default read from that field), so that a flag
is never named again as a parameter or an argument."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from trainop.cluster.options import ManagerOptions


@dataclass(frozen=True)
class Flag:
    """A flag and the option field it fills."""

    names: tuple[str, ...]
    field: str
    """The field of ManagerOptions, dotted into its parts (`webhook.port`)."""
    help: str
    type: Any = None
    is_flag: bool = False
    envvar: str | None = None
    dest: str | None = None
    """The parameter's name where it is not the first name's (upstream's tests use it)."""

    def option(self) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        default = _get(ManagerOptions(), self.field)
        extra: dict[str, Any] = {"is_flag": True} if self.is_flag else {
            "type": self.type, "default": default, "show_default": default is not None}
        return click.option(*self.names, *([self.dest] if self.dest else []),
                            envvar=self.envvar, help=self.help, **extra)

    @property
    def param(self) -> str:
        return self.dest or self.names[0].lstrip("-").replace("-", "_")


def own(name: str, field: str, help: str, shipped: bool = True) -> Flag:
    """A flag of trainop's own: off by default (upstream has no such behaviour); `shipped`:
    config/manager/deployment.yaml turns it on."""
    where = "the shipped Deployment turns it on" if shipped else "off in the shipped Deployment"
    return Flag((name,), field, f"{help} Not in upstream; {where}.", is_flag=True)


FLAGS: tuple[Flag, ...] = (
    Flag(("--namespace",), "namespace", "Watch and manage jobs in this namespace only "
         "[default: every namespace; env: KUBEFLOW_NAMESPACE].", envvar="KUBEFLOW_NAMESPACE"),
    Flag(("--gang-scheduler-name",), "engine.gang_scheduler",
         "volcano, workload-api (Kubernetes' own gang: a Workload and PodGroup of "
         "scheduling.k8s.io/v1beta1; 1.37+, gate GenericWorkload), or the name of a "
         "scheduler-plugins scheduler: create a PodGroup per job."),
    Flag(("--leader-elect",), "leader_elect",
         "Take part in leader election (a Lease); only the leader acts.", is_flag=True),
    Flag(("--leader-election-namespace",), "leader_election_namespace",
         "Namespace of the Lease [default: the manager's namespace]."),
    Flag(("--leader-election-id",), "leader_election_id",
         "Name of the Lease (upstream's: one of the two acts)."),
    Flag(("--lease-duration",), "lease.lease_duration",
         "Seconds a lease lasts without renewal.", click.FloatRange(min=1)),
    Flag(("--renew-deadline",), "lease.renew_deadline",
         "Seconds the leader may fail to renew before it stops.", click.FloatRange(min=0.5)),
    Flag(("--retry-period",), "lease.retry_period", "Seconds between lease attempts.",
         click.FloatRange(min=0.1)),
    Flag(("--metrics-bind-address",), "metrics_address",
         "Address of /metrics ('0' disables it)."),
    Flag(("--metrics-secure",), "metrics_secure",
         "Serve /metrics over HTTPS, only to callers allowed `get` on /metrics "
         "(TokenReview + SubjectAccessReview).", is_flag=True),
    Flag(("--health-probe-bind-address",), "health_address",
         "Address of /healthz and /readyz ('0' disables them)."),
    Flag(("--controller-threads",), "threads", "Jobs of one kind reconciled at once.",
         click.IntRange(min=1)),
    Flag(("--kube-api-qps",), "qps", "Requests per second to the API server (0: no limit).",
         click.FloatRange(min=0)),
    Flag(("--kube-api-burst",), "burst", "Requests allowed at once above the QPS.",
         click.IntRange(min=1)),
    Flag(("--webhook-server-port", "--webhook-port"), "webhook.port",
         "Port of the admission webhook (TLS); 0 disables it.",
         click.IntRange(min=0, max=65535), dest="webhook_port"),
    Flag(("--webhook-cert-dir",), "webhook.cert_dir",
         "tls.crt and tls.key (e.g. from cert-manager); made and renewed by the manager "
         "when absent.", click.Path(file_okay=False, path_type=Path)),
    Flag(("--webhook-service-name",), "webhook.service_name",
         "Service in front of the webhook (names the self-made certificate)."),
    Flag(("--webhook-service-namespace",), "webhook.service_namespace",
         "Namespace of that Service [env: POD_NAMESPACE].", envvar="POD_NAMESPACE"),
    Flag(("--webhook-config-name",), "webhook.config_name",
         "Validating/MutatingWebhookConfiguration that gets the CA bundle."),
    Flag(("--webhook-secret-name",), "webhook.secret_name",
         "Secret in the webhook Service's namespace holding the self-made certificates that "
         "every manager replica serves."),
    Flag(("--pytorch-init-container-image",), "engine.pytorch_init_image",
         "Image of the init container with which PyTorchJob workers wait until the master's "
         "name resolves."),
    Flag(("--pytorch-init-container-max-tries",), "engine.pytorch_init_max_tries",
         "How many times (2 s apart) that init container looks the name up.", int),
    Flag(("--mpi-kubectl-delivery-image",), "engine.mpi_kubectl_delivery_image",
         "Image of the MPI launcher's init container that brings kubectl (MPIJobs of the "
         "KubectlExec transport)."),
    Flag(("--kueue-manage-jobs-without-queue-name",), "kueue_without_queue_name",
         "Of the kinds of --kueue-workloads, queue jobs that name no queue too, as Kueue's "
         "manageJobsWithoutQueueName: set it as Kueue's Configuration does. Not in upstream.",
         is_flag=True),
    Flag(("--kueue-managed-jobs-namespace-selector",), "kueue_namespace_selector",
         "Queue jobs (of the kinds of --kueue-workloads) only in the namespaces this label "
         "selector matches, as Kueue's managedJobsNamespaceSelector ('': every namespace): "
         "set it as Kueue's Configuration does. Not in upstream."),
    own("--wait-for-dns", "engine.wait_for_dns",
        "Give pods that dial a peer by name as they start, without retrying the lookup "
        "(XGBoost's workers), an init container `wait-for-dns` that waits for that name "
        "(image and tries of the PyTorch init container)."),
    own("--aggregate-events", "engine.aggregate_events",
        "Tell one SuccessfulCreatePod, SuccessfulCreateService or SuccessfulDeletePod event "
        "per job and round, naming the objects, instead of one per object (fewer API writes "
        "for large jobs)."),
    own("--ignore-disruptions", "engine.ignore_disruptions",
        "For jobs that set no runPolicy.podFailurePolicy: a pod the cluster ended "
        "(preempted, evicted, its node drained: the DisruptionTarget condition) is made again "
        "and counted against no limit."),
    own("--restart-in-place", "engine.restart_in_place",
        "Jobs with runPolicy.restartScope Job that leave runPolicy.restartInPlace unset "
        "restart in place: every container of every pod restarts on its node, the pods "
        "kept, all ranks starting the next attempt together (Kubernetes 1.35+: where the "
        "cluster cannot, pods are made again)."),
    Flag(("--lost-node-grace",), "engine.lost_node_grace",
         "Watch nodes: a pod on a node whose Ready condition is not True is told at once "
         "(status.waitingReplicas NodeLost, a Warning), and deleted once the node has not been "
         "Ready for this many seconds, so that it is made again elsewhere; at once, with grace "
         "0, where the node carries the taint node.kubernetes.io/out-of-service. Needs list "
         "and watch on nodes. Not in upstream; the shipped Deployment sets 60 [default: "
         "unset, nodes are not watched].",
         type=click.FloatRange(min=0)),
    own("--progress-server", "progress_server",
        "Serve Kubeflow Trainer's progress route beside the webhook: the lead pod of a job "
        "whose ranks run under no rank supervisor gets KUBEFLOW_TRAINER_SERVER_URL, _CA_CERT "
        "and _TOKEN (a projected token of the job's audience) and reports there, as a "
        "TrainJob's pod does to Trainer's. Needs the webhook server and create on "
        "tokenreviews.", shipped=False),
    Flag(("--progress-interval",), "engine.progress_interval",
         "The fewest seconds between two writes of a job's status.progress (how far its lead "
         "rank reports it has got; its rank supervisor passes reports on this often). Not in "
         "upstream.", type=click.FloatRange(min=1, max=3600)),
    Flag(("--restart-agent-image",), "engine.restart_agent_image",
         "Image of the two containers a pod that restarts in place gets (a first init container "
         "that holds the pod until its attempt is released, and one beside the main container "
         "that ends the attempt): it needs a POSIX sh, cat and sleep. Not in upstream."),
    Flag(("--rank-supervisor-image",), "engine.rank_supervisor_image",
         "Image holding the rank supervisor at /usr/local/bin/trainop-supervisor (trainop's "
         "own): a pod that restarts in place, whose main container names its command, gets "
         "an init container that copies the supervisor into the pod, and the command runs as "
         "the supervisor's child (same output, exit code and signals); the manager then "
         "restarts the ranks' processes through it, on the pod's port 29611, the containers "
         "kept. Not in upstream; the shipped Deployment names its own image [default: unset, "
         "no pod gets it]."),
    own("--fallback-to-logs-on-error", "engine.fallback_to_logs_on_error",
        "Give containers whose template leaves terminationMessagePolicy unset "
        "FallbackToLogsOnError: a container that fails without writing a termination message "
        "leaves the end of its log in status.lastFailure."),
)


def options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (a click command) with every flag of FLAGS, in FLAGS' order."""
    for flag in reversed(FLAGS):
        fn = flag.option()(fn)
    return fn


def manager_options(params: dict[str, Any], **fields: Any) -> ManagerOptions:
    """ManagerOptions from the parsed flags (`params`, by parameter name) and the `fields`
    the command works out itself (kinds, the init template, ...: dotted paths as in FLAGS,
    with `.` written `__`)."""
    opts = ManagerOptions()
    for flag in FLAGS:
        opts = _set(opts, flag.field.split("."), params[flag.param])
    for path, value in fields.items():
        opts = _set(opts, path.split("__"), value)
    if opts.webhook is not None and not opts.webhook.port:
        opts.webhook = None
    return opts


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _set(obj: Any, path: list[str], value: Any) -> Any:
    """`obj` with the field at `path` set to `value` (frozen dataclasses replaced)."""
    head, *rest = path
    new = _set(getattr(obj, head), rest, value) if rest else value
    return dataclasses.replace(obj, **{head: new})
