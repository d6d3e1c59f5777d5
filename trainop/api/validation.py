"""Parsing and validation of jobs: every problem at once, each with its field path."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from trainop.api import templates
from trainop.api.conversion import ConversionError, convert, strays
from trainop.api.defaults import OUR_MANAGER, default_job
from trainop.api.kinds import API_VERSION, GROUP, JOB_MODELS, KINDS, OTHER_VERSIONS
from trainop.api.nesting import MAX_DEPTH, deepest
from trainop.api.problems import Problem
from trainop.api.resolved import resolve
from trainop.api.types import Defaulted, Job, PodFailurePolicy, ReplicaSpec

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}"
                        r"[A-Za-z0-9])?$")
"""A Kubernetes qualified name (a condition's type: DisruptionTarget, example.com/Cause)."""


def _label_key(text: str) -> bool:
    """A label's key: a qualified name whose prefix, if any, is at most 253 characters
    (whole: fullmatch, as `$` would take a trailing newline)."""
    return _QUALIFIED.fullmatch(text) is not None and len(text.rpartition("/")[0]) <= 253


MAX_REPLICAS = 10_000
"""Most pods one job may ask for: a typo of 1e6 must not make a million pods."""


MAX_PROBLEMS = 20
"""Problems told about one job; the rest are counted (a manifest with 100,000 bad entries
gets an answer of a few lines, not megabytes)."""
MANAGERS = (OUR_MANAGER, "kueue.x-k8s.io/multikueue")
"""The runPolicy.managedBy values upstream accepts (pkg/common/util/webhooks.go:11-13)."""


class InvalidJob(ValueError):
    """A job that cannot be run, with every problem found (the first MAX_PROBLEMS of them,
    then how many more)."""

    def __init__(self, problems: list[Problem]):
        if len(problems) > MAX_PROBLEMS:
            more = len(problems) - MAX_PROBLEMS
            problems = [*problems[:MAX_PROBLEMS],
                        Problem("(job)", f"{more} more problem{'s' if more > 1 else ''} "
                                         "not listed")]
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


def parse_job(obj: Any) -> Job:
    """Turn a manifest (a mapping) into the typed job of its kind, or raise InvalidJob."""
    if not isinstance(obj, Mapping):
        raise InvalidJob([Problem("(document)", f"must be a mapping, got {_kind_of(obj)}")])
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if kind not in JOB_MODELS:
        # Not a job at all: the kind is the one thing worth saying.
        raise InvalidJob([Problem("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")])
    _refuse_too_deep(obj)
    problems = []
    group, _, version = str(api_version).rpartition("/")
    other = OTHER_VERSIONS.get(kind, {}).get(version) if group == GROUP else None
    if other is not None:
        # another version the kind is served at: checked as the API server checks it
        # (strict fields), then read as v1, as the conversion webhook gives it to trainop
        strays_found = strays({k: v for k, v in obj.items() if k in ("spec", "status")},
                              other)
        if strays_found:
            raise InvalidJob([Problem(path, f"unknown field in {api_version} {kind}")
                              for path in strays_found])
        try:
            obj = convert(dict(obj), API_VERSION)
        except ConversionError as err:
            raise InvalidJob([Problem("metadata.annotations", str(err))]) from None
    elif api_version != API_VERSION:
        served = [API_VERSION, *(f"{GROUP}/{v}" for v in OTHER_VERSIONS.get(kind, {}))]
        problems.append(Problem("apiVersion", f"must be {' or '.join(served)}, got "
                                              f"{api_version!r}"))
    try:
        job = JOB_MODELS[kind].model_validate(dict(obj))
    except ValidationError as err:
        raise InvalidJob(problems + _from_pydantic(err)) from err
    if problems:
        raise InvalidJob(problems)
    return job


class TooDeep(InvalidJob):
    """A job nested more than MAX_DEPTH levels deep: nothing more of it is looked at
    (validation, copies and comparisons recurse)."""


def _refuse_too_deep(obj: Any) -> None:
    loc = deepest(obj)
    if loc is not None:
        raise TooDeep([Problem(_shortened(_path(loc)),
                               f"is nested more than {MAX_DEPTH} levels deep")])


def _shortened(path: str, start: int = 100, end: int = 30) -> str:
    """A long path as its start and end, which say where it is."""
    return path if len(path) <= start + end else f"{path[:start]}...{path[-end:]}"


def _kind_of(value: Any) -> str:
    if value is None:
        return "nothing"
    return {str: "a string", int: "an integer", float: "a number", bool: "a boolean",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    """A wrong value as the manifest's author wrote it: in JSON's words (`null`, `true`,
    `"two"`), after its kind."""
    if value is None:
        return "null"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return f"{_kind_of(value)} {text if len(text) <= 80 else text[:77] + '...'}"


def _path(loc: tuple[int | str, ...]) -> str:
    """A field path as Kubernetes writes it: list indexes and map keys in brackets
    (`spec.pytorchReplicaSpecs[Master].template.spec.containers[0].image`)."""
    out = ""
    keyed = False  # the previous part is a map of replica specs
    for part in loc:
        if isinstance(part, int) or keyed:
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
        keyed = isinstance(part, str) and part.endswith("ReplicaSpecs")
    return out or "(document)"


_EXPECTED = {
    "int_type": "an integer", "string_type": "a string", "bool_type": "a boolean",
    "dict_type": "an object", "model_type": "an object", "list_type": "a list",
    "model_attributes_type": "an object", "int_from_float": "an integer",
}


def _from_pydantic(err: ValidationError) -> list[Problem]:
    problems = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        # A union (X | None, int | str) reports each branch; the last part names the branch.
        if loc and loc[-1] in ("int", "str", "none"):
            loc = loc[:-1]
        typ = e["type"]
        got = e.get("input")
        if typ == "missing":
            msg = "is required"
        elif typ == "literal_error":
            expected = e.get("ctx", {}).get("expected", "")
            msg = f"must be one of {expected.replace(' or ', ', ')}, got {got!r}"
        elif typ in _EXPECTED:
            msg = f"must be {_EXPECTED[typ]}, got {_shown(got)}"
        else:
            msg = e["msg"]
        problems.append(Problem(_path(loc), msg))
    # unions report one problem per branch: keep each path/message once, in order
    return list(dict.fromkeys(problems))


def validate(job: Defaulted) -> list[Problem]:
    """Every problem of a defaulted job, in manifest order; empty when it can run."""
    info = job.info
    problems: list[Problem] = []
    name = job.metadata.name
    if not name:
        problems.append(Problem("metadata.name", "is required"))
    elif len(name) > 63 or not _DNS1035.fullmatch(name):
        problems.append(Problem(
            "metadata.name",
            f"must be a DNS-1035 label (at most 63 lower-case letters, digits and '-', "
            f"starting with a letter, ending with a letter or digit), got {name!r}",
        ))

    spec = job.spec
    main = spec.main_container_name()
    if main and (len(main) > 63 or not _DNS1123.fullmatch(main)):
        # a container's name is such a label (the API server refuses any other), and the
        # name goes into the launcher's kubexec.sh
        problems.append(Problem(
            "spec.mainContainer",
            f"must be a container name (at most 63 lower-case letters, digits and '-', "
            f"starting and ending with a letter or digit), got {main!r}",
        ))
    field = f"spec.{info.replica_specs_field}"
    if not spec.replica_specs:
        problems.append(Problem(field, "must name at least one replica type"))
    for rtype, rspec in spec.replica_specs.items():
        path = f"{field}[{rtype}]"
        if rtype not in info.replica_types:
            problems.append(Problem(
                path, f"unknown replica type; {info.kind} has {', '.join(info.replica_types)}"
            ))
        problems.extend(_replica_problems(job, rtype, rspec, path))
    problems.extend(_kind_problems(job, field))
    problems.extend(_run_policy_problems(job))
    return problems


def _replica_problems(job: Job, rtype: str, rspec: ReplicaSpec, path: str) -> list[Problem]:
    problems = []
    if rspec.replicas is not None and rspec.replicas < 0:
        problems.append(Problem(f"{path}.replicas", f"must be 0 or more, got {rspec.replicas}"))
    if rspec.restart_limit is not None and rspec.restart_limit < 0:
        problems.append(
            Problem(f"{path}.restartLimit", f"must be 0 or more, got {rspec.restart_limit}")
        )
    tpl_spec = (rspec.template or {}).get("spec")
    containers = tpl_spec.get("containers") if isinstance(tpl_spec, dict) else None
    if not isinstance(containers, list) or not containers:
        problems.append(Problem(
            f"{path}.template.spec.containers", "must have at least one container"
        ))
        return problems
    names = []
    for i, c in enumerate(containers):
        cpath = f"{path}.template.spec.containers[{i}]"
        if not isinstance(c, dict):
            problems.append(Problem(cpath, "must be an object"))
            continue
        names.append(c.get("name"))
        if not c.get("name"):
            problems.append(Problem(f"{cpath}.name", "is required"))
        if not c.get("image"):
            problems.append(Problem(f"{cpath}.image", "is required"))
    if job.spec.run_policy.restart_in_place and (
            own := templates.restarting_all(rspec.template)) is not None:
        problems.append(Problem(
            f"{path}.template.spec", f"container {own!r} restarts every container of the "
            "pod itself (a RestartAllContainers rule): with runPolicy.restartInPlace trainop "
            "restarts them, every pod of the job together; restart the one container "
            "(action Restart) or leave restartInPlace unset"))
    main = job.main_container
    # for most kinds the operator finds its container by the default name
    if not job.info.free_container_names and main not in names:
        problems.append(Problem(
            f"{path}.template.spec.containers",
            f"must have a container named {main!r} (the {job.info.kind} default container)",
        ))
    return problems


def _kind_problems(job: Defaulted, field: str) -> list[Problem]:
    specs = job.spec.replica_specs
    total = resolve(job).total
    if specs and total == 0:
        problems = [Problem(field, "must ask for at least one replica (all are 0)")]
    elif total > MAX_REPLICAS:
        problems = [Problem(field, f"must ask for at most {MAX_REPLICAS} replicas in all, "
                                   f"got {total}")]
    else:
        # Every job needs a replica whose end decides the job's end (the kind's rule).
        problems = job.spec.ender_problems(field)
    return problems + job.spec.kind_problems(field)


MAX_POLICY_RULES = 20
MAX_EXIT_CODES = 255
MAX_CONDITION_PATTERNS = 20
"""The Job API's limits of a podFailurePolicy (k8s.io/kubernetes pkg/apis/batch/validation)."""


def _pod_failure_policy_problems(job: Defaulted, policy: PodFailurePolicy) -> list[Problem]:
    """The Job API's rules for a podFailurePolicy, over every replica type's containers."""
    path = "spec.runPolicy.podFailurePolicy.rules"
    problems = []
    if len(policy.rules) > MAX_POLICY_RULES:
        problems.append(Problem(path, f"must have at most {MAX_POLICY_RULES} rules, "
                                      f"got {len(policy.rules)}"))
    names = set()
    for rspec in job.spec.replica_specs.values():
        tpl = (rspec.template or {}).get("spec") or {}
        for key in ("containers", "initContainers"):
            names |= {c.get("name") for c in tpl.get(key) or [] if isinstance(c, dict)}
    resolved = resolve(job)
    in_place = [rt for rt in resolved.replicas
                if resolved.pod_restart_policy(rt) in ("OnFailure", "Always")]
    for i, rule in enumerate(policy.rules):
        rpath = f"{path}[{i}]"
        if (rule.on_exit_codes is None) == (not rule.on_pod_conditions):
            problems.append(Problem(rpath, "must have one of onExitCodes and onPodConditions"))
        codes = rule.on_exit_codes
        if codes is not None:
            cpath = f"{rpath}.onExitCodes"
            if in_place:
                problems.append(Problem(cpath, "cannot match: the kubelet restarts "
                                        f"{', '.join(in_place)} in place (restartPolicy "
                                        "OnFailure or Always), so no exit code fails a pod; "
                                        "use Never or ExitCode"))
            if codes.container_name is not None and codes.container_name not in names:
                problems.append(Problem(f"{cpath}.containerName", "must be one of the "
                                        f"containers of the pod templates, got "
                                        f"{codes.container_name!r}"))
            values = codes.values
            if not values or len(values) > MAX_EXIT_CODES:
                problems.append(Problem(f"{cpath}.values", f"must have 1 to {MAX_EXIT_CODES} "
                                                           f"exit codes, got {len(values)}"))
            elif values != sorted(set(values)):
                problems.append(Problem(f"{cpath}.values", f"must be ordered and unique, "
                                                           f"got {values}"))
            if codes.operator == "In" and 0 in values:
                problems.append(Problem(f"{cpath}.values", "must not hold 0 for the In "
                                                           "operator (0 is no failure)"))
        patterns = rule.on_pod_conditions or []
        if len(patterns) > MAX_CONDITION_PATTERNS:
            problems.append(Problem(f"{rpath}.onPodConditions", f"must have at most "
                                    f"{MAX_CONDITION_PATTERNS} patterns, got {len(patterns)}"))
        for j, pattern in enumerate(patterns):
            if not _QUALIFIED.fullmatch(pattern.type):
                problems.append(Problem(f"{rpath}.onPodConditions[{j}].type",
                                        f"must be a condition type, got {pattern.type!r}"))
    return problems


def _run_policy_problems(job: Defaulted) -> list[Problem]:
    rp = job.spec.run_policy
    problems = []
    for name, value in (
        ("ttlSecondsAfterFinished", rp.ttl_seconds_after_finished),
        ("activeDeadlineSeconds", rp.active_deadline_seconds),
        ("backoffLimit", rp.backoff_limit),
    ):
        if value is not None and value < 0:
            problems.append(Problem(f"spec.runPolicy.{name}", f"must be 0 or more, got {value}"))
    if rp.pod_failure_policy is not None:
        problems.extend(_pod_failure_policy_problems(job, rp.pod_failure_policy))
    if rp.startup_deadline_seconds is not None and rp.startup_deadline_seconds < 1:
        problems.append(Problem("spec.runPolicy.startupDeadlineSeconds",
                                f"must be 1 or more, got {rp.startup_deadline_seconds}"))
    if rp.restart_in_place and rp.restart_scope != "Job":
        problems.append(Problem("spec.runPolicy.restartInPlace",
                                "needs restartScope: Job (what restarts in place is the "
                                "whole job)"))
    sp = rp.scheduling_policy
    if sp is not None:
        if sp.min_available is not None and sp.min_available < 0:
            problems.append(Problem(
                "spec.runPolicy.schedulingPolicy.minAvailable",
                f"must be 0 or more, got {sp.min_available}",
            ))
        if sp.schedule_timeout_seconds is not None and sp.schedule_timeout_seconds < 0:
            problems.append(Problem(
                "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds",
                f"must be 0 or more, got {sp.schedule_timeout_seconds}",
            ))
        if sp.topology_key is not None and not _label_key(sp.topology_key):
            problems.append(Problem(
                "spec.runPolicy.schedulingPolicy.topologyKey",
                f"must be a node label's key (a qualified name: [prefix/]name, the name at "
                f"most 63 characters), got {sp.topology_key!r}"))
    if rp.managed_by is not None and job.spec.checks_managed_by and \
            rp.managed_by not in MANAGERS:
        supported = ", ".join(f'"{m}"' for m in MANAGERS)
        problems.append(Problem("spec.runPolicy.managedBy", f'Unsupported value: '
                                f'"{rp.managed_by}": supported values: {supported}'))
    managed_by = job.spec.managed_by
    if managed_by is not None:
        # trainop's field, for Kueue's MultiKueue generic adapter: upstream's values
        if managed_by not in MANAGERS:
            supported = ", ".join(f'"{m}"' for m in MANAGERS)
            problems.append(Problem("spec.managedBy", f'Unsupported value: "{managed_by}": '
                                    f"supported values: {supported}"))
        elif rp.managed_by is not None and rp.managed_by != managed_by:
            problems.append(Problem("spec.managedBy", f'"{managed_by}" names another '
                                    f'controller than spec.runPolicy.managedBy '
                                    f'"{rp.managed_by}"; set one of them'))
    return problems


def load_job(obj: Any) -> Defaulted:
    """Parse, default and validate a manifest: the one entry point every runtime uses.

    Raises InvalidJob with every problem at once: fields of the wrong type are reported,
    left out, and the rest of the job is still checked.
    """
    try:
        job = default_job(parse_job(obj))
    except InvalidJob as err:
        problems = err.problems
        if isinstance(err, TooDeep) or any(p.path in ("kind", "(document)") for p in problems):
            raise
        job_or_none = _parse_without_bad_fields(obj, err)
        if job_or_none is not None:
            problems = problems + validate(default_job(job_or_none))
        raise InvalidJob(list(dict.fromkeys(problems))) from None
    problems = validate(job)
    if problems:
        raise InvalidJob(problems)
    return job


def _parse_without_bad_fields(obj: Mapping[str, Any], err: InvalidJob) -> Job | None:
    """The job with each badly typed field removed, to go on checking the rest."""
    doc = copy.deepcopy(dict(obj))
    doc["apiVersion"] = API_VERSION
    cause = err.__cause__ if isinstance(err.__cause__, ValidationError) else None
    for _ in range(10):
        if cause is None:
            return None
        for e in cause.errors():
            _remove(doc, e["loc"])
        try:
            return JOB_MODELS[doc["kind"]].model_validate(doc)
        except ValidationError as again:
            cause = again
    return None


def _remove(doc: Any, loc: tuple[int | str, ...]) -> None:
    """Delete the value at `loc` (a pydantic error location) from nested dicts and lists."""
    node = doc
    for part in loc[:-1]:
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if in_dict or in_list:
            node = node[part]
        else:
            return
    last = loc[-1] if loc else None
    if isinstance(node, dict) and last in node:
        del node[last]
    elif isinstance(node, list) and isinstance(last, int) and last < len(node):
        node[last] = {}


def _topology_key(job: Job) -> str | None:
    sp = job.spec.run_policy.scheduling_policy
    return sp.topology_key if sp is not None else None


def validate_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> Job:
    """`new` parsed, defaulted and valid as a replacement of the stored `old`, or
    InvalidJob. A spec left as it was is always allowed (labels, finalizers, status): a job
    stored before today's rules must stay updatable, or it can never finish being deleted.
    A changed spec meets today's rules, and keeps `runPolicy.managedBy` (where the kind's
    upstream webhook keeps it). A `schedulingPolicy.queue` once set is the CRD's rule to keep
    (`x-kubernetes-validations`, as upstream): the API server refuses its change before any
    webhook is asked."""
    _refuse_too_deep(new)
    if old.get("spec") == new.get("spec"):
        try:
            return load_job(new)
        except InvalidJob:
            return parse_job(new)
    job = load_job(new)
    try:
        before = parse_job(old)
    except InvalidJob:
        return job  # nothing to compare with
    problems = []
    if job.spec.checks_managed_by and \
            before.spec.run_policy.managed_by != job.spec.run_policy.managed_by:
        problems.append(Problem("spec.runPolicy.managedBy", "is immutable"))
    if before.spec.managed_by != job.spec.managed_by:
        problems.append(Problem("spec.managedBy", "is immutable"))
    if _topology_key(before) != _topology_key(job):
        # the job's gang is made with it once (a PodGroup's constraint never changes); the
        # CRD's rule sees a key changed, not one set or removed
        problems.append(Problem("spec.runPolicy.schedulingPolicy.topologyKey", "is immutable"))
    problems.extend(job.spec.update_problems(before.spec))
    if problems:
        raise InvalidJob(problems)
    return job
