"""Report a training job's progress to trainop, from the training script:

    from trainop import progress
    progress.report(epoch=3, epochs=10, metrics={"loss": 0.21})

The job's status then shows it (`status.progress`, `kubectl get -o wide`, `trainop
describe`), and `trainop run` draws it. Only the lead rank is asked (master, chief,
launcher, or worker 0); on every other rank, and outside trainop, `report` does nothing.

Standard library only: the file can be copied into an image that does not have trainop.
What it writes is Kubeflow Trainer's progress payload (KEP-2779), with trainop's step,
steps, epoch and epochs beside Trainer's fields, replaced whole (written, then renamed)
in the file TRAINOP_PROGRESS_FILE names (its rank supervisor, or `trainop run`, reads it);
where trainop gave the pod Trainer's variables instead (the manager's --progress-server),
it is POSTed there as a TrainJob's callback does, at most once every POST_GAP seconds
(and always at 100%). Any language can do either.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import ssl
import sys
import time
import urllib.request
from collections.abc import Mapping

ENV = "TRAINOP_PROGRESS_FILE"
URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"
CA_ENV = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
TOKEN_ENV = "KUBEFLOW_TRAINER_SERVER_TOKEN"
POST_GAP = 5.0
"""Seconds between two reports POSTed (Trainer's SDK sends as often); those between are
dropped."""
RANKS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
"""Where a process learns its rank (torch.distributed, Open MPI, MPICH, PMIx): the lead
pod's processes of any other rank (torchrun's, mpirun's, which inherit the variable) do
not report."""
METRICS_MOST = 256
TEXT_MOST = 64

_started: float | None = None
_posted: float | None = None
_failed = False


def enabled() -> bool:
    """Whether this process is asked to report: trainop gave it TRAINOP_PROGRESS_FILE or
    Trainer's variables, and it is rank 0 where it knows its rank."""
    return bool(os.environ.get(ENV) or os.environ.get(URL_ENV)) and all(
        os.environ.get(name, "0") == "0" for name in RANKS)


def report(*, percent: int | None = None, step: int | None = None, steps: int | None = None,
           epoch: int | None = None, epochs: int | None = None,
           remaining_seconds: int | None = None,
           metrics: Mapping[str, object] | None = None) -> None:
    """Say how far training has got. `percent` follows from step of steps (else epoch of
    epochs) where it is not given, and the time left from the time taken so far where
    that is not. Metrics are named values (the first 8 are shown); numbers are written
    with 6 significant digits. Never raises for a file it cannot write: says so once on
    standard error and goes on (the training matters more than its report)."""
    global _started, _posted
    if not enabled():
        return
    now = time.monotonic()
    if _started is None:
        _started = now
    if percent is None:
        for n, of in ((step, steps), (epoch, epochs)):
            if n is not None and of:
                percent = max(0, min(100, n * 100 // of))
                break
    if remaining_seconds is None and percent and 0 < percent < 100 and now > _started:
        remaining_seconds = round((now - _started) * (100 - percent) / percent)
    status: dict[str, object] = {
        "lastUpdatedTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    for field, value in (("progressPercentage", percent), ("step", step), ("steps", steps),
                         ("epoch", epoch), ("epochs", epochs),
                         ("estimatedRemainingSeconds", remaining_seconds)):
        if value is not None:
            status[field] = value
    if metrics:
        status["metrics"] = [{"name": str(name)[:TEXT_MOST], "value": _shown(value)}
                             for name, value in list(metrics.items())[:METRICS_MOST]]
    payload = {"trainerStatus": status}
    if path := os.environ.get(ENV):
        try:
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(payload, f)
            os.replace(tmp, path)
        except OSError as err:
            _say_once(f"cannot write {path}: {err}")
    elif _posted is None or now - _posted >= POST_GAP or percent == 100:
        _posted = now
        _post(os.environ[URL_ENV], payload)


def _post(url: str, payload: Mapping[str, object]) -> None:
    """POST the report as Trainer's SDK does: the token (renewed by the kubelet) read
    afresh each time, the server checked against the CA it was given."""
    try:
        with open(os.environ.get(TOKEN_ENV, ""), encoding="ascii") as f:
            token = f.read().strip()
        context = ssl.create_default_context(cafile=os.environ.get(CA_ENV) or None)
        request = urllib.request.Request(
            url, data=json.dumps(payload).encode(), method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=context, timeout=5) as answer:
            answer.read()
    except (OSError, ValueError, ssl.SSLError) as err:  # URLError and HTTPError are OSErrors
        _say_once(f"cannot report to {url}: {err}")


def _say_once(what: str) -> None:
    global _failed
    if not _failed:
        _failed = True
        print(f"trainop.progress: {what}", file=sys.stderr)


def _shown(value: object) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.6g}"
    return str(value)[:TEXT_MOST]
