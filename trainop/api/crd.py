"""CustomResourceDefinitions generated from the API models (config/crd/ holds the output)."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from trainop.api.install import crd_file
from trainop.api.kinds import GROUP, JOB_MODELS, OTHER_VERSIONS, VERSION, KindInfo
from trainop.api.kubeschema import kube_schema, quantity_pattern
from trainop.api.model import SchemaHint
from trainop.api.types import Job

CONVERSION_PATH = "/convert"
CONVERSION_SERVICE = {"name": "trainop-webhook", "namespace": "trainop-system",
                      "path": CONVERSION_PATH, "port": 443}
"""Where the API server asks for a conversion: the admission webhook's Service
(config/webhook/service.yaml; kustomize's namespace setting rewrites the namespace)."""


def _hints(metadata: list[Any]) -> SchemaHint | None:
    return next((m for m in metadata if isinstance(m, SchemaHint)), None)


def _schema_of(tp: Any, metadata: list[Any] | None = None) -> dict[str, Any]:
    """OpenAPI v3 structural schema of a Python type used in the models."""
    hint = _hints(metadata or [])
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        base, *extra = typing.get_args(tp)
        return _schema_of(base, [*extra, *(metadata or [])])
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return _schema_of(args[0], metadata)
        if hint and hint.int_or_string:
            return {"anyOf": [{"type": "integer"}, {"type": "string"}],
                    "pattern": quantity_pattern(), "x-kubernetes-int-or-string": True}
        raise TypeError(f"no structural schema for union {tp}")
    if hint and hint.kube:
        return kube_schema(hint.kube)
    if origin is dict:
        _, value = typing.get_args(tp)
        return {"type": "object", "additionalProperties": _schema_of(value)}
    if origin is list:
        (item,) = typing.get_args(tp)
        listed: dict[str, Any] = {"type": "array", "items": _schema_of(item)}
        if hint and hint.list_map_keys:
            listed["x-kubernetes-list-map-keys"] = list(hint.list_map_keys)
            listed["x-kubernetes-list-type"] = "map"
        return listed
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _model_schema(tp)
    leaf: dict[str, Any]
    if origin is Literal:
        # No enum unless asked, as upstream's v1 CRDs: the API server stores any string and
        # trainop's validation (webhook, or the job's Failed condition) says which it takes.
        leaf = {"type": "string"}
        if hint and hint.enum:
            leaf["enum"] = list(typing.get_args(tp))
    elif tp is bool:
        leaf = {"type": "boolean"}
    elif tp is int:
        leaf = {"type": "integer", "format": "int32"}
    elif tp is str:
        leaf = {"type": "string"}
    else:
        raise TypeError(f"no structural schema for {tp}")
    if hint and hint.format:
        leaf["format"] = hint.format
    if hint and hint.default is not None:
        leaf["default"] = hint.default
    return leaf


def _field_schema(field: FieldInfo) -> dict[str, Any]:
    schema = _schema_of(field.annotation, list(field.metadata))
    hint = _hints(list(field.metadata))
    if hint and hint.validations:
        schema["x-kubernetes-validations"] = [
            {"message": message, "rule": rule} for rule, message in hint.validations]
    if field.description:
        schema = {"description": field.description, **schema}
    return schema


def _model_schema(model: type[BaseModel]) -> dict[str, Any]:
    props = {}
    required = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        props[key] = _field_schema(field)
        if field.is_required():
            required.append(key)
    schema: dict[str, Any] = {"type": "object", "properties": dict(sorted(props.items()))}
    doc = (model.__doc__ or "").strip().split("\n")[0]
    if doc and not doc.startswith(model.__name__ + "("):
        schema = {"description": doc, **schema}
    if required:
        schema["required"] = sorted(required)
    return schema


def _subresources(info: KindInfo) -> dict[str, Any]:
    """status, and scale where the kind has a replica type behind it."""
    subresources: dict[str, Any] = {"status": {}}
    if info.scale_replica_type:
        rt = info.scale_replica_type
        subresources["scale"] = {
            "specReplicasPath": f".spec.{info.replica_specs_field}.{rt}.replicas",
            "statusReplicasPath": f".status.replicaStatuses.{rt}.active",
            "labelSelectorPath": f".status.replicaStatuses.{rt}.selector",
        }
    return subresources


PROGRESS_COLUMN: dict[str, object] = {"jsonPath": ".status.progress.percent", "name": "Progress",
                   "type": "integer", "priority": 1,
                   "description": "trainop: percent done, as the job's lead rank reports"}
"""trainop's own column: `kubectl get -o wide` shows it, the default output stays
upstream's (kubeflow.org/v1 only: mpi-operator's v2beta1 has no columns, and one of
priority 1 alone would take away the default Age)."""


def crd_for(model: type[Job]) -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CRD of one job kind."""
    info = model.info
    spec_schema = _schema_of(model.model_fields["spec"].annotation)
    # the API server refuses a job without replica specs, as upstream's CRDs make it do
    spec_schema["required"] = sorted({*spec_schema.get("required", ()),
                                      info.replica_specs_field})
    columns: list[dict[str, object]] = [
        {"jsonPath": ".status.conditions[-1:].type", "name": "State", "type": "string"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    ]
    columns = [*(columns[::-1] if info.age_column_first else columns), PROGRESS_COLUMN]
    status_schema = _schema_of(model.model_fields["status"].annotation)
    versions = [{
        "name": VERSION,
        "served": True,
        "storage": True,
        "additionalPrinterColumns": columns,
        "schema": {"openAPIV3Schema": _object_schema(
            f"{info.kind} is a {info.framework} training job.", spec_schema, status_schema)},
        "subresources": _subresources(info),
    }]
    for version, other in OTHER_VERSIONS.get(info.kind, {}).items():
        versions.append({
            "name": version,
            "served": True,
            "storage": False,
            "schema": {"openAPIV3Schema": _object_schema(
                (other.__doc__ or "").strip(),
                _schema_of(other.model_fields["spec"].annotation),
                _schema_of(other.model_fields["status"].annotation))},
            "subresources": {"status": {}},
        })
    spec: dict[str, Any] = {
        "group": GROUP,
        "names": {
            "kind": info.kind,
            "listKind": f"{info.kind}List",
            "plural": info.plural,
            "singular": info.kind.lower(),
        },
        "scope": "Namespaced",
        "versions": versions,
    }
    if len(versions) > 1:
        # the manager serves the conversion beside its admission webhook, and puts its CA
        # into clientConfig.caBundle as it does into the webhook configurations
        spec["conversion"] = {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": dict(CONVERSION_SERVICE)}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{info.plural}.{GROUP}"},
        "spec": spec,
    }


def _object_schema(description: str, spec: dict[str, Any], status: dict[str, Any]
                   ) -> dict[str, Any]:
    return {
        "description": description,
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }


def all_crds() -> dict[str, dict[str, Any]]:
    """File name -> CRD, for every kind (the names of upstream's config files)."""
    return {
        crd_file(m.info.plural): crd_for(m) for m in JOB_MODELS.values()
    }
