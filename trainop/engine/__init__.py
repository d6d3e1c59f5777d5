"""The job engine: `reconcile(job, observed, now, framework, addressing)` returns a Plan.

Pure: no I/O, no clock reads, no asyncio, no global state. Both runtimes (the cluster
manager and the local runner) observe, call `reconcile` and apply the plan.
"""

from trainop.engine.addressing import ClusterAddressing
from trainop.engine.config import EngineConfig
from trainop.engine.failures import Verdict, classify
from trainop.engine.framework import (
    POD_IP,
    Addressing,
    Counts,
    Env,
    FieldRef,
    Framework,
    Launcher,
)
from trainop.engine.observed import (
    BatchJob,
    Ended,
    Held,
    Observed,
    OwnedObject,
    Phase,
    PodState,
    SSHKeyPair,
    Waiting,
)
from trainop.engine.outcomes import create_refused, created_only, rejected
from trainop.engine.plan import Event, ObjectRef, Plan
from trainop.engine.reconcile import reconcile
from trainop.engine.wording import Wording

__all__ = [
    "POD_IP", "Addressing", "BatchJob", "ClusterAddressing", "Counts", "Ended", "EngineConfig",
    "Env", "Event", "FieldRef", "Framework", "Held", "Launcher", "ObjectRef", "Observed",
    "OwnedObject", "Phase", "Plan", "PodState", "SSHKeyPair", "Verdict", "Waiting", "Wording",
    "classify", "create_refused", "created_only", "reconcile", "rejected",
]
