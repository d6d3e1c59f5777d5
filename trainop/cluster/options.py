"""The manager's options and their defaults, in one place: the flags of `trainop manager`
show these defaults and fill these fields. Light on purpose (no client, no aiohttp), so the
command line reads them without loading the runtime."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from trainop.api import KINDS
from trainop.engine import EngineConfig


@dataclass
class LeaseTimes:
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass
class WebhookOptions:
    port: int = 9443
    cert_dir: Path = Path("/tmp/k8s-webhook-server/serving-certs")
    service_name: str = "training-operator"
    service_namespace: str = "trainop-system"
    config_name: str = "trainop"
    secret_name: str = "training-operator-webhook-cert"
    """Secret (in service_namespace) holding the certificates every replica serves."""
    host: str = "0.0.0.0"


@dataclass
class ManagerOptions:
    kinds: list[str] = field(default_factory=lambda: list(KINDS))
    kueue_kinds: list[str] = field(default_factory=list)
    """Kinds whose queued jobs' Kueue Workloads the manager keeps (--kueue-workloads)."""
    kueue_without_queue_name: bool = False
    """Queue their jobs that name no queue too (Kueue's manageJobsWithoutQueueName)."""
    kueue_namespace_selector: str = "kubernetes.io/metadata.name notin (kube-system,kueue-system)"
    """The namespaces whose jobs are queued (Kueue's managedJobsNamespaceSelector, as a
    label selector; its default with Kueue in kueue-system)."""
    namespace: str | None = None
    leader_elect: bool = False
    leader_election_namespace: str | None = None
    leader_election_id: str = "1ca428e5.training-operator.kubeflow.org"
    lease: LeaseTimes = field(default_factory=LeaseTimes)
    metrics_address: str = ":8080"
    health_address: str = ":8081"
    threads: int = 1
    qps: float = 20.0
    burst: int = 30
    kubeconfig: str | None = None
    metrics_secure: bool = False
    """Serve /metrics over TLS to callers the API server authenticates and authorizes."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """What shapes the plans (the gang scheduler, init and delivery images, events)."""
    cluster_domain: str | None = None
    """The cluster domain of TF_CONFIG's names: upstream reads CUSTOM_CLUSTER_DOMAIN from
    its environment (pkg/controller.v1/tensorflow/tensorflow.go:32, :175-178)."""
    webhook: WebhookOptions | None = field(default_factory=WebhookOptions)
    """None: no admission webhook served."""
    progress_server: bool = False
    """Take progress reports beside the webhook, as Kubeflow Trainer's status server does
    (cluster/serving/progress_server.py), from the lead pods of jobs without a rank
    supervisor."""
