"""The base of every API model: camelCase on the wire, strict types, unknown fields kept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


@dataclass(frozen=True)
class SchemaHint:
    """How a field appears in the generated CRD schema when its Python type cannot say."""

    preserve_unknown: bool = False
    """An object of any shape (a pod template, an HPA metric): kept as written."""
    int_or_string: bool = False
    """A Kubernetes quantity or port: an integer or a string."""
    validations: tuple[tuple[str, str], ...] = ()
    """CEL rules the API server checks, as (rule, message): `x-kubernetes-validations`."""


RawObject = Annotated[dict[str, Any], SchemaHint(preserve_unknown=True)]
Quantity = Annotated[int | str, SchemaHint(int_or_string=True)]


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
