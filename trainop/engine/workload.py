"""A job's Kueue Workload (kueue.x-k8s.io/v1beta2), and what the Workload's admission adds to
the job's pods, built as Kueue builds them for its own job integrations (sigs.k8s.io/kueue
v0.19.2: pkg/controller/jobframework, pkg/controller/jobs/kubeflow, pkg/podset), so that a
Workload trainop keeps for a kind Kueue names in `integrations.externalFrameworks` is the one
Kueue's built-in integration would have made.

Every function takes the job as stored (api.parse_job, not defaulted): Kueue reads the
stored templates, and a Workload built from defaulted ones would differ from its own by the
ports and fields defaulting adds in memory. Pure: the cluster side looks up what lives
elsewhere (the priority class, the admitted flavors) and hands it in.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from trainop.api import Job
from trainop.api.numbers import go_int
from trainop.engine import quantity
from trainop.engine.labels import owner_reference
from trainop.engine.workload_record import (
    OwnerRef,
    Workload,
    WorkloadCondition,
    WorkloadStatus,
)

API_VERSION = "kueue.x-k8s.io/v1beta2"
KIND = "Workload"
FINALIZER = "kueue.x-k8s.io/resource-in-use"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
PROVISIONING_PREFIX = "provreq.kueue.x-k8s.io/"
"""Job annotations Kueue copies onto the Workload (its ProvisioningRequest parameters)."""
ADMISSION_GATED_BY = "kueue.x-k8s.io/admission-gated-by"
"""A job annotation Kueue copies onto the Workload (controllers that hold admission)."""
PODSET_LABEL = "kueue.x-k8s.io/podset"
LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
MULTIKUEUE_POD_LABEL = "kueue.x-k8s.io/multikueue-worker-workload-pod"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED_TOPOLOGY = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
SLICE_CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
PODSET_GROUP = "kueue.x-k8s.io/podset-group-name"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
"""What Kueue's topology-aware scheduling ranks a pod set's pods by."""

_NAME_LENGTH = 253
_HASH_LENGTH = 5


class WorkloadError(ValueError):
    """A job Kueue would refuse to make a Workload of (an annotation it cannot parse), or an
    admission that cannot be applied to its pods (a label it would set differently)."""


def name(job: Job) -> str:
    """The name of the job's Workload."""
    return owned_name(job.kind, job.api_version.split("/")[0], job.name,
                      job.metadata.uid or "")


def owned_name(kind: str, group: str, owner: str, uid: str) -> str:
    """A Workload's name from its owner's (Kueue's GetWorkloadNameForOwnerWithGVK,
    workload_names.go): the kind in lowercase and the owner's name, cut to fit, then a hash
    of kind, group, name and UID, so that a job made again under its name gets another."""
    prefix = f"{kind.lower()}-{owner}"[:_NAME_LENGTH - _HASH_LENGTH - 1]
    digest = hashlib.sha1(f"{kind}\n{group}\n{owner}\n{uid}".encode()).hexdigest()
    return f"{prefix}-{digest[:_HASH_LENGTH]}"


def queue_name(job: Job) -> str | None:
    """The LocalQueue the job asks for (its label), or None: not queued."""
    return (job.metadata.labels or {}).get(QUEUE_LABEL) or None


def priority_class_name(job: Job) -> str:
    """The PriorityClass a job's Workload takes its priority from, as Kueue's kubeflow
    integrations choose it (kubeflowjob_controller.go: PriorityClass): the run policy's
    schedulingPolicy.priorityClass, else the first replica type's, in the kind's order, whose
    template names one; "" for none (the cluster's global default then)."""
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.priority_class:
        return policy.priority_class
    for rtype in job.info.replica_types:
        spec = job.spec.replica_specs.get(rtype)
        found = ((spec.template or {}).get("spec") or {}).get("priorityClassName") \
            if spec is not None else None
        if isinstance(found, str) and found:
            return found
    return ""


def max_execution_seconds(job: Job) -> int | None:
    """The job's `kueue.x-k8s.io/max-exec-time-seconds` (a positive int32), or None."""
    value = (job.metadata.labels or {}).get(MAX_EXEC_TIME_LABEL)
    if value is None:
        return None
    seconds = go_int(value, 32)
    if seconds is None:
        raise WorkloadError(f"{MAX_EXEC_TIME_LABEL}: {value!r} is not an int32")
    if seconds <= 0:
        raise WorkloadError(f"{MAX_EXEC_TIME_LABEL}: {value!r} is not a positive int32")
    return seconds


def topology_request(annotations: Mapping[str, str]) -> dict[str, Any]:
    """A pod set's topology request from its template's annotations (jobframework/tas.go:
    Build, as the kubeflow integrations call it: always with the replica-index label, so
    every pod set has one)."""
    request: dict[str, Any] = {}
    if REQUIRED_TOPOLOGY in annotations:
        request["required"] = annotations[REQUIRED_TOPOLOGY]
    elif PREFERRED_TOPOLOGY in annotations:
        request["preferred"] = annotations[PREFERRED_TOPOLOGY]
    elif UNCONSTRAINED_TOPOLOGY in annotations:
        request["unconstrained"] = _go_bool(UNCONSTRAINED_TOPOLOGY,
                                            annotations[UNCONSTRAINED_TOPOLOGY])
    if SLICE_CONSTRAINTS in annotations:
        try:
            # (orjson refuses past 1,024 levels; Python's json would overflow its stack)
            layers = orjson.loads(annotations[SLICE_CONSTRAINTS])
        except ValueError as e:
            raise WorkloadError(f"{SLICE_CONSTRAINTS}: not JSON ({e})") from None
        if not isinstance(layers, list) or not 1 <= len(layers) <= 3 or not all(
                isinstance(layer, dict) for layer in layers):
            raise WorkloadError(f"{SLICE_CONSTRAINTS}: must list 1 to 3 layers")
        request["podsetSliceRequiredTopologyConstraints"] = layers
    elif SLICE_REQUIRED_TOPOLOGY in annotations and SLICE_SIZE in annotations:
        request["podSetSliceRequiredTopology"] = annotations[SLICE_REQUIRED_TOPOLOGY]
        size = go_int(annotations[SLICE_SIZE], 32)
        if size is None:
            raise WorkloadError(f"{SLICE_SIZE}: {annotations[SLICE_SIZE]!r} is not an int32")
        request["podSetSliceSize"] = size
    request["podIndexLabel"] = REPLICA_INDEX_LABEL
    if PODSET_GROUP in annotations and ("required" in request or "preferred" in request):
        request["podSetGroupName"] = annotations[PODSET_GROUP]
    return request


def _go_bool(key: str, value: str) -> bool:
    # Go's strconv.ParseBool, which Kueue parses the annotation with
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise WorkloadError(f"{key}: {value!r} is not a boolean")


def pod_sets(job: Job) -> list[dict[str, Any]]:
    """One pod set per replica type the job has, in the kind's order, named in lowercase
    (kubeflowjob_controller.go: PodSets): its count and a copy of its template."""
    sets = []
    for rtype in job.info.replica_types:
        spec = job.spec.replica_specs.get(rtype)
        if spec is None:
            continue
        template = copy.deepcopy(spec.template or {})
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        count = 1 if spec.replicas is None else spec.replicas
        pod_set: dict[str, Any] = {
            "name": rtype.lower(),
            "count": count,
            "template": template,
            "topologyRequest": topology_request(annotations),
        }
        least = min_count(job, rtype)
        if least is not None and least < count:
            pod_set["minCount"] = least
        sets.append(pod_set)
    return sets


def min_count(job: Job, rtype: str) -> int | None:
    """The fewest replicas of `rtype` the job can run with, where it can run partly: an
    elastic job's workers (elasticPolicy.minReplicas), which Kueue may then admit fewer of
    than asked (partial admission). trainop's own: Kueue's kubeflow integration asks for
    every replica."""
    elastic = job.spec.elastic()
    if rtype != "Worker" or elastic is None or elastic.min_replicas is None:
        return None
    return max(elastic.min_replicas, 1)


@dataclass(frozen=True)
class Priority:
    """Where a Workload's priority comes from, as the cluster side found it: a
    WorkloadPriorityClass (the job's priority-class label) or a PriorityClass; `name` ""
    and `value` 0 where there is neither."""

    kind: str = ""
    name: str = ""
    value: int = 0

    def fields(self) -> dict[str, Any]:
        """The Workload spec's priorityClassRef and priority (written even when 0, as
        PrepareWorkloadPriority writes it)."""
        if not self.name:
            return {"priority": self.value}
        group = "kueue.x-k8s.io" if self.kind == "WorkloadPriorityClass" else \
            "scheduling.k8s.io"
        return {"priorityClassRef": {"group": group, "kind": self.kind, "name": self.name},
                "priority": self.value}


@dataclass(frozen=True)
class PriorityClasses:
    """The cluster's priority classes as the caches show them: what a Workload's priority
    is found in (observed, as Kueue reads them from its own cache)."""

    workload: Mapping[str, int] = field(default_factory=dict)
    """WorkloadPriorityClass name -> value."""
    pod: Mapping[str, int] = field(default_factory=dict)
    """PriorityClass name -> value."""
    global_default: Mapping[str, int] = field(default_factory=dict)
    """The PriorityClasses marked globalDefault, name -> value."""


def priority(job: Job, classes: PriorityClasses) -> Priority:
    """The priority of the job's Workload (ExtractPriority): its WorkloadPriorityClass
    label, else the PriorityClass of its run policy or first template naming one, else the
    cluster's global default PriorityClass (the lowest, where several say they are)."""
    wpc = (job.metadata.labels or {}).get(PRIORITY_CLASS_LABEL)
    if wpc:
        if wpc not in classes.workload:
            raise WorkloadError(
                f'priority class: workloadpriorityclasses.kueue.x-k8s.io "{wpc}" not found')
        return Priority("WorkloadPriorityClass", wpc, classes.workload[wpc])
    name = priority_class_name(job)
    if name:
        if not dns_subdomain(name):
            raise WorkloadError(f"priority class {name[:64]!r} is not a valid name")
        if name not in classes.pod:
            raise WorkloadError(
                f'priority class: priorityclasses.scheduling.k8s.io "{name}" not found')
        return Priority("PriorityClass", name, classes.pod[name])
    if not classes.global_default:
        return Priority()
    value, low = min((v, n) for n, v in classes.global_default.items())
    return Priority("PriorityClass", low, value)


def desired(job: Job, priority: Priority) -> dict[str, Any]:
    """The Workload of a queued job (jobframework: ConstructWorkload, NewWorkload): owned
    by the job, labelled with its UID, held by Kueue's finalizer while it uses quota."""
    meta: dict[str, Any] = {
        "name": name(job),
        "namespace": job.namespace,
        "labels": {JOB_UID_LABEL: job.metadata.uid or ""},
        "finalizers": [FINALIZER],
        "ownerReferences": [owner_reference(job)],
    }
    copied = {k: v for k, v in (job.metadata.annotations or {}).items()
              if k.startswith(PROVISIONING_PREFIX) or k == ADMISSION_GATED_BY}
    if copied:
        meta["annotations"] = copied
    spec: dict[str, Any] = {"podSets": pod_sets(job)}
    if queue_name(job):
        # none where Kueue manages jobs without a queue name (the Workload waits for one)
        spec["queueName"] = queue_name(job)
    spec.update(priority.fields())
    seconds = max_execution_seconds(job)
    if seconds is not None:
        spec["maximumExecutionTimeSeconds"] = seconds
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}


def matches(job: Job, workload: Workload) -> bool:
    """Whether `workload` is the job's (jobframework: EquivalentToWorkload): owned by this
    job, the same maximum execution time, and pod sets of the same counts and containers
    (and tolerations, until it is admitted: admission adds its flavor's)."""
    owner = workload.controller
    if owner is None or owner.name != job.name or owner.uid != (job.metadata.uid or ""):
        return False
    if workload.max_execution_seconds != max_execution_seconds(job):
        return False
    mine, theirs = pod_sets(job), workload.pod_sets
    if len(mine) != len(theirs):
        return False
    fields = COMPARED[1:] if workload.status.admitted else COMPARED
    for a, b in zip(mine, theirs, strict=True):
        if a["count"] != b.get("count") or a.get("minCount") != b.get("minCount"):
            return False
        if any(_compared(a, f) != _compared(b, f) for f in fields):
            return False
    return True


COMPARED = ("tolerations", "initContainers", "containers")
"""What of a pod set's template `matches` compares (tolerations only before admission)."""
DIGESTS = "trainop.kubeflow.org/compared"
"""In a slim pod set (`read`), in place of its template: a digest of each COMPARED field."""


def read(obj: Mapping[str, Any]) -> Workload:
    """A Workload as the cache keeps it: typed, and each pod set's template (a job's may be
    1.5 MiB, five times that decoded) replaced by digests of what `matches` compares of it.
    What is not of the shape the CRD's schema gives is read as absent."""
    meta, spec, status = (_dict(obj.get(k)) for k in ("metadata", "spec", "status"))
    seconds = spec.get("maximumExecutionTimeSeconds")
    admission = status.get("admission")
    return Workload(
        namespace=_str(meta.get("namespace")), name=_str(meta.get("name")),
        uid=_str(meta.get("uid")), resource_version=_str(meta.get("resourceVersion")),
        generation=_int(meta.get("generation")),
        labels={k: v for k, v in _dict(meta.get("labels")).items() if isinstance(v, str)},
        finalizers=tuple(f for f in _list(meta.get("finalizers")) if isinstance(f, str)),
        owners=tuple(OwnerRef(_str(r.get("apiVersion")), _str(r.get("kind")),
                              _str(r.get("name")), _str(r.get("uid")),
                              r.get("controller") is True)
                     for r in _dicts(meta.get("ownerReferences"))),
        deleting=bool(meta.get("deletionTimestamp")),
        queue_name=_str(spec.get("queueName")),
        max_execution_seconds=seconds if type(seconds) is int else None,
        pod_sets=tuple({**{k: v for k, v in ps.items() if k != "template"},
                        DIGESTS: {f: _compared(ps, f) for f in COMPARED}}
                       for ps in _dicts(spec.get("podSets"))),
        status=WorkloadStatus(
            conditions=tuple(WorkloadCondition(
                _str(c.get("type")), _str(c.get("status")), _str(c.get("reason")),
                _str(c.get("message")), _str(c.get("lastTransitionTime")),
                _int(c.get("observedGeneration"))) for c in _dicts(status.get("conditions"))),
            admission=admission if isinstance(admission, dict) else None,
            reclaimable_pods=tuple((_str(r.get("name")), r["count"])
                                   for r in _dicts(status.get("reclaimablePods"))
                                   if type(r.get("count")) is int),
            admission_checks=tuple(_dicts(status.get("admissionChecks")))))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in _list(value) if isinstance(v, dict)]


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    return value if type(value) is int else 0


def _compared(pod_set: Mapping[str, Any], field: str) -> str:
    """A digest of `field` of the pod set's template as Kubernetes' semantic equality sees
    it (a slim pod set carries it already)."""
    digests = pod_set.get(DIGESTS)
    if isinstance(digests, dict) and field in digests:
        return str(digests[field])
    spec = ((pod_set.get("template") or {}).get("spec") or {})
    value = _semantic(spec.get(field)) if isinstance(spec, dict) else None
    return hashlib.sha256(orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS)
                          ).hexdigest()


def _semantic(value: Any) -> Any:
    """`value` as Kubernetes' semantic equality sees it: empty and missing alike, resource
    quantities by amount ("1000m" is "1")."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in ("limits", "requests") and isinstance(v, dict):
                v = {r: _amount(q) for r, q in v.items()}
            v = _semantic(v)
            if v not in (None, {}, []):
                out[k] = v
        return out
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def _amount(value: Any) -> Any:
    """A quantity's amount, or `value` itself where it is none (compared as written)."""
    try:
        return quantity.parse(value) if isinstance(value, (int, float, str)) else value
    except ValueError:
        return value


@dataclass
class PodSetInfo:
    """What a pod set's admission adds to its pods (pkg/podset: PodSetInfo)."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    scheduling_gates: list[dict[str, Any]] = field(default_factory=list)
    count: int | None = None
    """The replicas admitted (fewer than asked where Kueue admitted the pod set partly)."""

    def merge(self, other: PodSetInfo, where: str) -> None:
        """Add `other`'s, refusing a key set to another value (PodSetInfo.Merge)."""
        for mine, theirs, what in ((self.labels, other.labels, "labels"),
                                   (self.annotations, other.annotations, "annotations"),
                                   (self.node_selector, other.node_selector, "nodeSelector")):
            clash = sorted(k for k, v in theirs.items() if k in mine and mine[k] != v)
            if clash:
                raise WorkloadError(f"{where}: conflicting {what} {', '.join(clash)}")
            mine.update(theirs)
        self.tolerations += [t for t in other.tolerations if t not in self.tolerations]
        self.scheduling_gates += [g for g in other.scheduling_gates
                                  if g not in self.scheduling_gates]


def admitted(workload: Workload, flavors: Mapping[str, Mapping[str, Any]]
             ) -> dict[str, PodSetInfo]:
    """What the Workload's admission adds to each pod set's pods, by pod set name
    (reconciler.go: getPodSetsInfoFromStatus, podset.FromAssignment): the assigned
    flavors' node labels and tolerations (`flavors`: each ResourceFlavor's spec, by name),
    the topology gate where Kueue places the pods itself, the pod set and queue labels, and
    the admission checks' updates. Empty where it is not admitted."""
    admission = workload.status.admission or {}
    sets = {ps.get("name"): ps for ps in workload.pod_sets}
    infos: dict[str, PodSetInfo] = {}
    for assignment in admission.get("podSetAssignments") or []:
        ps_name = assignment.get("name", "")
        info = PodSetInfo(labels={PODSET_LABEL: ps_name},
                          annotations={WORKLOAD_ANNOTATION: workload.name},
                          count=assignment.get("count"))
        if assignment.get("topologyAssignment") is not None:
            request = sets.get(ps_name, {}).get("topologyRequest") or {}
            if not any(k in request for k in ("required", "preferred", "unconstrained")):
                info.annotations[UNCONSTRAINED_TOPOLOGY] = "true"
            info.scheduling_gates.append({"name": TOPOLOGY_GATE})
        for flavor in dict.fromkeys((assignment.get("flavors") or {}).values()):
            if flavor not in flavors:
                raise WorkloadError(f"ResourceFlavor {flavor} not found")
            found = flavors[flavor]
            info.node_selector.update(found.get("nodeLabels") or {})
            info.tolerations += list(found.get("tolerations") or [])
        if MULTIKUEUE_ORIGIN_LABEL in workload.labels:
            info.labels[MULTIKUEUE_POD_LABEL] = "true"
        info.labels[LOCAL_QUEUE_LABEL] = workload.queue_name
        cluster_queue = admission.get("clusterQueue", "")
        if _dns_label(cluster_queue):
            info.labels[CLUSTER_QUEUE_LABEL] = cluster_queue
        for check in workload.status.admission_checks:
            for update in check.get("podSetUpdates") or []:
                if update.get("name") == ps_name:
                    info.merge(PodSetInfo(
                        labels=dict(update.get("labels") or {}),
                        annotations=dict(update.get("annotations") or {}),
                        node_selector=dict(update.get("nodeSelector") or {}),
                        tolerations=list(update.get("tolerations") or [])),
                        f"admission check {check.get('name')}")
                    break
        infos[ps_name] = info
    return infos


def dns_subdomain(value: str) -> bool:
    """Whether `value` is a DNS-1123 subdomain (what most objects' names are)."""
    return len(value) <= 253 and all(_dns_label(part) for part in value.split("."))


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _dns_label(value: str) -> bool:
    """Whether `value` is a DNS-1123 label (ASCII only: "é".islower() and "²".isdigit())."""
    return _DNS_LABEL.fullmatch(value) is not None


def apply(pod: dict[str, Any], info: PodSetInfo, where: str) -> None:
    """Merge an admission's additions into a pod (or pod template), in place
    (podset.Merge): a label, annotation or node selector the pod already sets to another
    value is refused, never overwritten."""
    meta = pod.setdefault("metadata", {})
    spec = pod.setdefault("spec", {})
    merged = PodSetInfo(labels=dict(meta.get("labels") or {}),
                        annotations=dict(meta.get("annotations") or {}),
                        node_selector=dict(spec.get("nodeSelector") or {}),
                        tolerations=list(spec.get("tolerations") or []),
                        scheduling_gates=list(spec.get("schedulingGates") or []))
    merged.merge(info, where)
    for target, key, value in ((meta, "labels", merged.labels),
                               (meta, "annotations", merged.annotations),
                               (spec, "nodeSelector", merged.node_selector),
                               (spec, "tolerations", merged.tolerations),
                               (spec, "schedulingGates", merged.scheduling_gates)):
        if value:
            target[key] = value
