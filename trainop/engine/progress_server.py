"""The pod's side of Kubeflow Trainer's progress route (KEP-2779), for a job whose lead
pod has no rank supervisor to pass its reports on (--progress-server): the lead pod's
main container gets Trainer's variables, KUBEFLOW_TRAINER_SERVER_URL (the manager's
endpoint for this job), _CA_CERT and _TOKEN (files: the manager's CA, and a
ServiceAccount token the kubelet projects and renews, of an audience that names the
job), so that a callback written for a TrainJob reports unchanged. The manager checks
the token (cluster/serving/progress_server.py) and the report is read as any other
(engine/progress.py)."""

from __future__ import annotations

from typing import Any

from trainop.api.resources import CONFIGMAPS
from trainop.api.templates import container
from trainop.api.types import Defaulted
from trainop.engine.config import EngineConfig
from trainop.engine.labels import job_labels, object_meta
from trainop.engine.observed import Observed

URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"
CA_ENV = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
TOKEN_ENV = "KUBEFLOW_TRAINER_SERVER_TOKEN"
VOLUME = "trainop-progress"
DIR = "/var/run/secrets/trainop/progress"
AUDIENCE = "trainop.kubeflow.org"
TOKEN_SECONDS = 3600
"""The token's life; the kubelet renews it before (the helper reads the file each time)."""
CA = "ca.crt"


def path(namespace: str, plural: str, name: str) -> str:
    """Where the manager takes a job's reports."""
    return f"/apis/kubeflow.org/v1/namespaces/{namespace}/{plural}/{name}/progress"


def audience(namespace: str, plural: str, name: str) -> str:
    """The audience of the tokens that may report for the job: no other job's."""
    return f"{AUDIENCE}/{namespace}/{plural}/{name}"


def ca_config_map(job_name: str) -> str:
    return f"{job_name}-trainop-progress-ca"


def objects(job: Defaulted, observed: Observed, config: EngineConfig
            ) -> list[dict[str, Any]]:
    """The ConfigMap of the manager's CA the lead pod mounts, kept current (the CA
    rotates: a new one is written, the kubelet updates the pod's file)."""
    if config.progress_server is None or observed.progress_ca is None:
        return []
    return [CONFIGMAPS.new(object_meta(job, ca_config_map(job.name), job_labels(job)),
                           data={CA: observed.progress_ca})]


def decorate(pod: dict[str, Any], job: Defaulted, observed: Observed,
             config: EngineConfig) -> None:
    """Give the job's lead pod's main container Trainer's variables and their files (where
    the runtime offers the CA its ConfigMap holds: without it the pod would not start)."""
    base = config.progress_server if observed.progress_ca is not None else None
    c = container(pod, job.main_container)
    if base is None or c is None:
        return
    where = (job.namespace, job.info.plural, job.name)
    c["env"] = [*(c.get("env") or []),
                {"name": URL_ENV, "value": base + path(*where)},
                {"name": CA_ENV, "value": f"{DIR}/{CA}"},
                {"name": TOKEN_ENV, "value": f"{DIR}/token"}]
    c["volumeMounts"] = [*(c.get("volumeMounts") or []),
                         {"name": VOLUME, "mountPath": DIR, "readOnly": True}]
    spec = pod["spec"]
    spec["volumes"] = [*(spec.get("volumes") or []), {"name": VOLUME, "projected": {
        "sources": [
            {"serviceAccountToken": {"audience": audience(*where),
                                     "expirationSeconds": TOKEN_SECONDS, "path": "token"}},
            {"configMap": {"name": ca_config_map(job.name),
                           "items": [{"key": CA, "path": CA}]}}]}}]
