"""The install's lists of kinds, generated from the declared kinds as `trainop crds`
writes their CRDs: the CRDs' kustomization, the validating webhooks, and the ClusterRole's
rules on the jobs themselves. config/ holds what these generate (`trainop crds --config
config`; a unit test keeps them equal), so a new kind is declared once and installed."""

from __future__ import annotations

from typing import Any

import yaml

from trainop.api.kinds import GROUP, KINDS

WEBHOOK_HEADER = """\
# As upstream v1.9 (manifests/base/webhook/manifests.yaml at release-1.9): one validating
# webhook for each kind that has one (KindInfo.validating_webhook); no mutating webhook,
# so stored jobs are never rewritten with defaults (what is applied is what is stored).
# The webhooks' names are upstream's (a refusal names its webhook). The manager patches its
# CA into clientConfig.caBundle.
# Generated from the declared kinds (trainop crds --config config); never edit it
# by hand.
"""


def crd_file(plural: str) -> str:
    """The name of a kind's CRD file (upstream's config file names)."""
    return f"{GROUP}_{plural}.yaml"


def crd_kustomization() -> str:
    """config/crd/kustomization.yaml: every declared kind's CRD."""
    return "# Generated CRDs (trainop crds --config config); never edit them by hand.\n" + \
        yaml.safe_dump({"resources": [crd_file(i.plural) for i in KINDS.values()]},
                       sort_keys=False, indent=2).replace("\n- ", "\n  - ")


def path_for(action: str, kind: str) -> str:
    """controller-runtime's path convention: /validate-kubeflow-org-v1-pytorchjob."""
    return f"/{action}-kubeflow-org-v1-{kind.lower()}"


def webhooks(service: str = "trainop-webhook", namespace: str = "trainop-system"
             ) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration: one webhook per kind that has one, named as
    upstream names it, led to `service` in `namespace`."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "trainop"},
        "webhooks": [{
            "name": f"validator.{info.kind.lower()}.training-operator.kubeflow.org",
            "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "timeoutSeconds": 10,
            "clientConfig": {"service": {"name": service, "namespace": namespace,
                                         "path": path_for("validate", info.kind), "port": 443}},
            "rules": [{"apiGroups": [GROUP], "apiVersions": ["v1"],
                       "operations": ["CREATE", "UPDATE"], "resources": [info.plural],
                       "scope": "Namespaced"}],
        } for info in KINDS.values() if info.validating_webhook],
    }


def webhook_manifests() -> str:
    """config/webhook/manifests.yaml."""
    return WEBHOOK_HEADER + yaml.safe_dump(webhooks(), sort_keys=False)


def job_rules() -> list[dict[str, Any]]:
    """The ClusterRole's rules on the jobs: read and delete them (a TTL that ran out), write
    their status, update their finalizers (blockOwnerDeletion where the API server enforces
    owner references' permissions) and patch them (Kueue's suspend)."""
    plurals = [i.plural for i in KINDS.values()]
    return [
        {"apiGroups": [GROUP], "resources": plurals, "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": [GROUP], "resources": [f"{p}/status" for p in plurals],
         "verbs": ["update"]},
        {"apiGroups": [GROUP], "resources": [f"{p}/finalizers" for p in plurals],
         "verbs": ["update"]},
        {"apiGroups": [GROUP], "resources": plurals, "verbs": ["patch"]},
    ]


def generated() -> dict[str, str]:
    """Path under config/ -> text, for each whole file generated (the CRDs themselves:
    crd.all_crds)."""
    return {"crd/kustomization.yaml": crd_kustomization(),
            "webhook/manifests.yaml": webhook_manifests()}
