"""The base of every API model: camelCase on the wire, strict types, unknown fields kept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


@dataclass(frozen=True)
class SchemaHint:
    """How a field appears in the generated CRD schema when its Python type cannot say."""

    int_or_string: bool = False
    """A Kubernetes quantity or port: an integer or a string."""
    validations: tuple[tuple[str, str], ...] = ()
    """CEL rules the API server checks, as (rule, message): `x-kubernetes-validations`."""
    format: str | None = None
    """The OpenAPI format of a string or integer (`date-time`, `int64`)."""
    default: bool | int | str | None = None
    """The value the API server stores where the field is left out."""
    enum: bool = False
    """A Literal's values are an `enum` the API server checks (by default they are not, as
    upstream's v1 CRDs: trainop's validation says which values it takes)."""
    list_map_keys: tuple[str, ...] = ()
    """A list keyed by these fields of its items (`x-kubernetes-list-type: map`)."""
    kube: str | None = None
    """A Kubernetes type (its OpenAPI name): the schema is that type's, from the API server
    (trainop.api.kubeschema), while the model keeps the object as a dict."""


PodTemplate = Annotated[dict[str, Any], SchemaHint(kube="io.k8s.api.core.v1.PodTemplateSpec")]
MetricSpec = Annotated[dict[str, Any], SchemaHint(kube="io.k8s.api.autoscaling.v2.MetricSpec")]
LabelSelector = Annotated[dict[str, Any], SchemaHint(
    kube="io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector")]
Quantity = Annotated[int | str, SchemaHint(int_or_string=True)]
Time = Annotated[str, SchemaHint(format="date-time")]
"""An RFC 3339 time, as metav1.Time is on the wire."""
Int64 = Annotated[int, SchemaHint(format="int64")]


T = TypeVar("T")


class NotDefaulted(ValueError):
    """A field defaulting always sets was unset: the job did not go through default_job."""


def settled(value: T | None, field: str) -> T:
    """`value` of `field`, which defaulting always sets: what reads a defaulted job reads
    it through here, and a job that skipped defaulting is said, never guessed over."""
    if value is None:
        raise NotDefaulted(f"{field} is unset: the job was not defaulted")
    return value


class Model(BaseModel):
    """API object: fields are snake_case in Python, camelCase in manifests.

    Unknown fields are kept (extra="allow") so that a manifest read and written back
    loses nothing; types are strict, as the API server's are (no "2" for 2).
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        strict=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The manifest form: camelCase keys, unset (None) fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")
