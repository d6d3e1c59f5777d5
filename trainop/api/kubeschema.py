"""CRD schemas of the Kubernetes types a job embeds, made from the Kubernetes API types.

A job's pod templates, its HPA metrics and a replica's label selector are Kubernetes types.
`kubeschema.json` beside this module holds their schemas as controller-gen (the generator
of upstream's CRDs) makes them from k8s.io/api of the release the suites run: every field
with its type, list and map types, defaults and required fields, so that the API server
checks a template as it checks a pod's, `kubectl explain` reads it, and server-side apply
merges containers by name. `python -m testbed.kubeschema` (`make crds`) remakes it.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

SCHEMAS_FILE = Path(__file__).with_name("kubeschema.json")

ROOTS = (
    "io.k8s.api.core.v1.PodTemplateSpec",
    "io.k8s.api.autoscaling.v2.MetricSpec",
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
)
"""The Kubernetes types the job CRDs embed, by their OpenAPI names."""


@cache
def _stored() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SCHEMAS_FILE.read_text())
    return data


def kube_schema(name: str) -> dict[str, Any]:
    """The stored CRD schema of Kubernetes type `name` (one of ROOTS), a fresh copy."""
    return copy.deepcopy(_stored()["schemas"][name])


def quantity_pattern() -> str:
    """The syntax of a resource quantity, as the stored schemas give it (a container's
    resource limits), for trainop's own quantity fields."""
    template = _stored()["schemas"]["io.k8s.api.core.v1.PodTemplateSpec"]
    container = template["properties"]["spec"]["properties"]["containers"]["items"]
    limits = container["properties"]["resources"]["properties"]["limits"]
    return str(limits["additionalProperties"]["pattern"])
