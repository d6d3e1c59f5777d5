"""Conversion of a job between the versions its kind is served at (MPIJob: v1, which is
stored, and mpi-operator's v2beta1), the CRD's conversion webhook's work.

Nothing is lost either way (the Kubernetes convention): the fields a version has no place
for travel in an annotation of the other (`trainop.kubeflow.org/<version>-fields`, JSON)
and come back when the job is read at their version again; and a job read at a version it
was not written in says where it was written (`trainop.kubeflow.org/written-in`), which is
how the engine, reading every job as v1, runs a job as the API it was written in says.
Both ways are the identity on a round trip (tests/unit/test_conversion.py).

The annotations are the job author's to write, so they are read as hostile. Conversion to
v1, the stored version, happens only as a job is written: a stash that v1 cannot take
(not a JSON object, a field the job's own version has a place for, a value of the wrong
type, a `status`) refuses the write. Conversion from v1 happens as stored jobs are read
(every list and watch at v2beta1, in one review for many jobs): one job's unreadable
stash is left out of its form there, never a failure, which would make every reader of
that version in the cluster fail.
"""

from __future__ import annotations

import copy
import json
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from trainop.api import nesting
from trainop.api.kinds import GROUP, JOB_MODELS, OTHER_VERSIONS, VERSION

WRITTEN_IN = f"trainop.{GROUP}/written-in"
"""On a job read at another version than the one it was written in: that version."""

STORED = VERSION
"""The version the CRDs store: conversion to it is a write."""

IMPLIED: dict[tuple[str, str], dict[str, Any]] = {
    ("MPIJob", "v2beta1"): {"spec": {"transport": "SSH"}},
}
"""What the v1 form of a job written in another version says that the version leaves
unsaid: mpi-operator's MPIJob always reaches its workers by SSH."""


class ConversionError(ValueError):
    """A job that cannot be converted (the API server refuses the request with this)."""


def fields_annotation(version: str) -> str:
    """The annotation that carries a job's fields only `version` has a place for."""
    return f"trainop.{GROUP}/{version}-fields"


def versions_of(kind: str) -> dict[str, type[BaseModel]]:
    """Every version `kind` is served at, with its model (v1 first)."""
    if kind not in JOB_MODELS:
        raise ConversionError(f"kind {kind!r} is not served by trainop")
    return {VERSION: JOB_MODELS[kind], **OTHER_VERSIONS.get(kind, {})}


def convert(obj: dict[str, Any], api_version: str,
            ignored: list[str] | None = None) -> dict[str, Any]:
    """`obj` (a job at any version its kind is served at) at `api_version`; `obj` is left
    as it was. Converting a stored job (to any version but STORED), what its annotations
    say that cannot be taken is left out and said in `ignored`, never refused."""
    kind = obj.get("kind")
    if not isinstance(kind, str):
        raise ConversionError("the object has no kind")
    served = versions_of(kind)
    source = _version_of(obj.get("apiVersion"), served, "apiVersion")
    target = _version_of(api_version, served, "the desired apiVersion")
    out = copy.deepcopy(obj)
    if source == target:
        return out
    meta = out.get("metadata")
    if not isinstance(meta, dict):
        meta = out["metadata"] = {}
    annotations = dict(meta.get("annotations") or {})
    # a job at `source` keeps its own fields in itself: a stash of them means nothing
    annotations.pop(fields_annotation(source), None)
    body: dict[str, Any] = {key: out.pop(key) for key in ("spec", "status") if key in out}
    fits, rest = split(body, served[target])
    try:
        written = _written(annotations.pop(WRITTEN_IN, source), kind, served)
        stashed = _stashed(annotations.pop(fields_annotation(target), None), target,
                           served[source], served[target], fits)
    except ConversionError as err:
        if target == STORED or ignored is None:
            raise
        ignored.append(str(err))
        written, stashed = source, {}
    implied = IMPLIED.get((kind, written), {})
    if target == VERSION:
        fits = merged(merged(fits, stashed), implied)
    else:
        fits = merged(fits, stashed)
        if source == VERSION:
            rest = without(rest, implied)
    out.update(fits)
    out["apiVersion"] = f"{GROUP}/{target}"
    if rest:
        annotations[fields_annotation(source)] = json.dumps(
            rest, sort_keys=True, separators=(",", ":"))
    if written != target:
        annotations[WRITTEN_IN] = written
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return out


def written_in(annotations: dict[str, str] | None, api_version: str) -> str:
    """The version a job read at `api_version`, with these annotations, was written in."""
    return (annotations or {}).get(WRITTEN_IN) or api_version.rpartition("/")[2]


def _version_of(api_version: Any, served: dict[str, Any], what: str) -> str:
    group, _, version = str(api_version).rpartition("/")
    if group != GROUP or version not in served:
        raise ConversionError(f"{what} {api_version!r} is not one of "
                              f"{', '.join(f'{GROUP}/{v}' for v in served)}")
    return version


def _written(value: Any, kind: str, served: dict[str, Any]) -> str:
    if value not in served:
        raise ConversionError(f"annotation {WRITTEN_IN}: {value!r} is not a version of "
                              f"{kind} ({', '.join(served)})")
    return str(value)


def _stashed(text: Any, version: str, source: type[BaseModel], target: type[BaseModel],
             fits: dict[str, Any]) -> dict[str, Any]:
    """The fields annotation `text` stashes for `version`, checked: a JSON object of
    `spec` fields only `version` has a place for (at `source` they would be in the job
    itself), each of the type `target` gives it once merged under `fits`."""
    name = fields_annotation(version)
    if text is None:
        return {}
    try:
        value = nesting.loads(text) if isinstance(text, str) else None
    except ValueError as err:
        raise ConversionError(f"annotation {name} is not JSON: {err}") from None
    if not isinstance(value, dict):
        raise ConversionError(f"annotation {name} is not a JSON object")
    if nesting.deepest(value) is not None:
        # (what follows walks it by recursion)
        raise ConversionError(f"annotation {name} is nested more than {nesting.MAX_DEPTH} "
                              "levels deep")
    if set(value) - {"spec"}:
        # a status above all: what only the status subresource may write
        raise ConversionError(f"annotation {name} may hold spec fields only, not "
                              f"{', '.join(sorted(set(value) - {'spec'}))}")
    placed = _leaves(split(value, source)[0])
    if placed:
        raise ConversionError(f"annotation {name}: {placed[0]} has a place at the job's "
                              "own version: write it there")
    spec = merged(fits, value).get("spec")
    try:
        target.model_validate({"spec": spec} if isinstance(spec, dict) else {})
    except ValidationError as err:
        for problem in err.errors():
            loc = problem["loc"]
            if _holds(value, loc):
                raise ConversionError(f"annotation {name}: "
                                      f"{'.'.join(map(str, loc))}: {problem['msg']}") from None
    return value


def _leaves(value: dict[str, Any], path: str = "") -> list[str]:
    """The paths of what `value` holds besides (nested) mappings."""
    out = []
    for key, item in value.items():
        here = f"{path}.{key}" if path else str(key)
        out.extend(_leaves(item, here) if isinstance(item, dict) else [here])
    return out


def _holds(value: Any, loc: tuple[int | str, ...]) -> bool:
    """Whether `value` (nested mappings) gave what is at `loc`: has it, or a value (not a
    mapping) on the way to it."""
    for part in loc:
        if not isinstance(value, dict):
            return True
        if part not in value:
            return False
        value = value[part]
    return True


def _walked(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """How a field's values are split: ("model", M) for a model, ("map", M) for a map of
    models, None for a value taken whole (scalars, lists, pod templates)."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return None
            annotation = args[0]
        else:
            break
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "model", annotation
    if typing.get_origin(annotation) is dict:
        value = typing.get_args(annotation)[1]
        if isinstance(value, type) and issubclass(value, BaseModel):
            return "map", value
    return None


def split(value: dict[str, Any], model: type[BaseModel]) -> tuple[dict[str, Any],
                                                                  dict[str, Any]]:
    """What of `value` (a manifest's mapping) `model` has a place for, and the rest, each
    nested as in `value`."""
    fields = {field.alias or name: field for name, field in model.model_fields.items()}
    fits: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, item in value.items():
        field = fields.get(key)
        if field is None:
            rest[key] = item
            continue
        walked = _walked(field.annotation) if isinstance(item, dict) else None
        if walked is None:
            fits[key] = item
            continue
        how, inner = walked
        if how == "model":
            fits[key], left = split(item, inner)
        else:
            fits[key], left = {}, {}
            for name, sub in item.items():
                if isinstance(sub, dict):
                    fits[key][name], sub_left = split(sub, inner)
                    if sub_left:
                        left[name] = sub_left
                else:
                    fits[key][name] = sub
        if left:
            rest[key] = left
    return fits, rest


def strays(value: dict[str, Any], model: type[BaseModel]) -> list[str]:
    """The paths of `value`'s fields `model` has no place for (`spec.mainContainer`,
    `spec.mpiReplicaSpecs[Worker].restartLimit`): what the API server's strict field
    validation refuses at that version."""
    return _paths(split(value, model)[1], model, "")


def _paths(rest: dict[str, Any], model: type[BaseModel], path: str) -> list[str]:
    fields = {field.alias or name: field for name, field in model.model_fields.items()}
    out = []
    for key, item in rest.items():
        here = f"{path}.{key}" if path else key
        field = fields.get(key)
        walked = _walked(field.annotation) if field is not None else None
        if walked is None:
            out.append(here)
        elif walked[0] == "model":
            out.extend(_paths(item, walked[1], here))
        else:
            for name, sub in item.items():
                out.extend(_paths(sub, walked[1], f"{here}[{name}]"))
    return out


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`base` with what `extra` adds, nested; where both have a value, `base`'s."""
    out = dict(base)
    for key, item in extra.items():
        if isinstance(item, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], item)
        elif key not in out:
            out[key] = copy.deepcopy(item)
    return out


def without(value: dict[str, Any], implied: dict[str, Any]) -> dict[str, Any]:
    """`value` without what equals `implied`'s (nested), and without mappings left empty."""
    out = {}
    for key, item in value.items():
        gone = implied.get(key)
        if isinstance(item, dict) and isinstance(gone, dict) and item:
            item = without(item, gone)
            if item:  # a mapping emptied here goes; one written empty stays
                out[key] = item
        elif key not in implied or implied[key] != item:
            out[key] = item
    return out
