"""Builders of job manifests for tests."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from trainop.api import KINDS, Job, load_job
from trainop.api.conversion import WRITTEN_IN


def pod_template(container: str, image: str = "example.com/train:1", **extra: Any
                 ) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": container, "image": image, **extra}]}}


def manifest(kind: str, replicas: Mapping[str, int | None], name: str = "job",
             namespace: str = "default", spec: dict[str, Any] | None = None,
             replica_extra: dict[str, dict[str, Any]] | None = None,
             uid: str = "uid-1") -> dict[str, Any]:
    """A manifest of `kind` with the given replica counts (None: leave replicas out)."""
    info = KINDS[kind]
    specs: dict[str, Any] = {}
    for rtype, count in replicas.items():
        rs: dict[str, Any] = {"template": pod_template(info.default_container)}
        if count is not None:
            rs["replicas"] = count
        rs.update(copy.deepcopy((replica_extra or {}).get(rtype, {})))
        specs[rtype] = rs
    return {
        "apiVersion": "kubeflow.org/v1", "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {info.replica_specs_field: specs, **(spec or {})},
    }


TYPICAL: dict[str, dict[str, int | None]] = {
    "TFJob": {"Chief": 1, "PS": 1, "Worker": 2},
    "PyTorchJob": {"Master": 1, "Worker": 2},
    "MPIJob": {"Launcher": 1, "Worker": 2},
    "XGBoostJob": {"Master": 1, "Worker": 2},
    "PaddleJob": {"Worker": 3},
    "JAXJob": {"Worker": 3},
    "MXJob": {"Scheduler": 1, "Server": 1, "Worker": 2},
}


def job(kind: str, replicas: Mapping[str, int | None] | None = None, **kw: Any) -> Job:
    """A defaulted, valid job of `kind` (the typical replica layout unless given)."""
    return load_job(manifest(kind, replicas or TYPICAL[kind], **kw))


def v2beta1_job(extra: dict[str, Any] | None = None, workers: int = 2) -> Job:
    """A v2beta1 MPIJob's v1 form, as the conversion gives it, defaulted."""
    doc = manifest("MPIJob", {"Launcher": 1, "Worker": workers},
                   spec={"transport": "SSH", **(extra or {})})
    doc["metadata"]["annotations"] = {WRITTEN_IN: "v2beta1"}
    return load_job(doc)
