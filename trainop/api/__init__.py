"""The kubeflow.org/v1 job API: types, defaulting, validation and CRD generation."""

from trainop.api import (
    jobs,  # noqa: F401  (declares the seven kinds)
    v2beta1,  # noqa: F401  (declares MPIJob's v2beta1)
)
from trainop.api.defaults import OUR_MANAGER, default_job
from trainop.api.kinds import (
    API_VERSION,
    GROUP,
    JOB_MODELS,
    KINDS,
    VERSION,
    KindInfo,
    declare_kind,
    withdraw_kind,
)
from trainop.api.manifest import ManifestError, read_documents
from trainop.api.problems import Problem
from trainop.api.types import (
    Defaulted,
    FailureInfo,
    Job,
    JobCondition,
    JobStatus,
    ReplicaSpec,
    ReplicaStatus,
    RunPolicy,
    WaitingReplica,
)
from trainop.api.validation import (
    InvalidJob,
    load_job,
    parse_job,
    validate,
    validate_update,
)

__all__ = [
    "API_VERSION", "GROUP", "JOB_MODELS", "KINDS", "OUR_MANAGER", "VERSION",
    "Defaulted", "FailureInfo", "InvalidJob", "Job", "JobCondition", "JobStatus", "KindInfo",
    "ManifestError", "Problem", "ReplicaSpec", "ReplicaStatus", "RunPolicy",
    "WaitingReplica",
    "declare_kind", "default_job", "load_job", "parse_job", "read_documents", "validate",
    "validate_update", "withdraw_kind",
]
