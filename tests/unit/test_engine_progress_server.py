"""The lead pod's side of Trainer's progress route (engine/progress_server.py): Trainer's
variables, a token of the job's audience and the manager's CA, where the manager serves
reports (--progress-server) and no rank supervisor passes them on."""

from __future__ import annotations

import dataclasses
from typing import Any

from tests.jobs import job
from tests.sim import Cluster
from trainop.engine import EngineConfig

SERVER = "https://trainop-webhook-service.trainop-system.svc"
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
ON = EngineConfig(progress_server=SERVER)


class Offering(Cluster):
    """The simulated cluster, its runtime offering the manager's CA."""

    ca: str | None = CA

    @property
    def observed(self) -> Any:
        return dataclasses.replace(super().observed, progress_ca=self.ca)


def made(config: EngineConfig = ON, ca: str | None = CA,
         **kw: Any) -> Offering:
    c = Offering(job("TFJob", {"Chief": 1, "Worker": 2}, **kw), config)
    c.ca = ca
    c.step()
    return c


def test_the_lead_pod_gets_trainers_variables_and_files() -> None:
    c = made()
    main = c.pod("job-chief-0")["spec"]["containers"][0]
    assert main["env"][-3:] == [
        {"name": "KUBEFLOW_TRAINER_SERVER_URL", "value": f"{SERVER}/apis/kubeflow.org/v1/"
         "namespaces/default/tfjobs/job/progress"},
        {"name": "KUBEFLOW_TRAINER_SERVER_CA_CERT",
         "value": "/var/run/secrets/trainop/progress/ca.crt"},
        {"name": "KUBEFLOW_TRAINER_SERVER_TOKEN",
         "value": "/var/run/secrets/trainop/progress/token"}]
    assert main["volumeMounts"][-1] == {"name": "trainop-progress", "readOnly": True,
                                        "mountPath": "/var/run/secrets/trainop/progress"}
    assert c.pod("job-chief-0")["spec"]["volumes"][-1] == {
        "name": "trainop-progress", "projected": {"sources": [
            {"serviceAccountToken": {"audience": "trainop.kubeflow.org/default/tfjobs/job",
                                     "expirationSeconds": 3600, "path": "token"}},
            {"configMap": {"name": "job-trainop-progress-ca",
                           "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}
    # the CA it mounts, the job's own
    cm = c.created["ConfigMap/job-trainop-progress-ca"]
    assert cm["data"] == {"ca.crt": CA}
    assert cm["metadata"]["ownerReferences"][0]["name"] == "job"


def test_no_other_pod_is_given_anything() -> None:
    c = made()
    for name in ("job-worker-0", "job-worker-1"):
        spec = c.pod(name)["spec"]
        assert not any(v["name"] == "trainop-progress" for v in spec.get("volumes") or [])
        assert not any(e["name"].startswith("KUBEFLOW_TRAINER")
                       for e in spec["containers"][0].get("env") or [])


def test_without_the_server_or_its_ca_nothing_changes() -> None:
    for c in (made(config=EngineConfig()), made(ca=None)):
        assert "ConfigMap/job-trainop-progress-ca" not in c.created
        assert not any(v["name"] == "trainop-progress"
                       for v in c.pod("job-chief-0")["spec"].get("volumes") or [])


def test_a_rotated_ca_is_written_to_the_jobs_configmap() -> None:
    c = made()
    c.ca = CA.replace("MIIB", "MIIC")
    plan = c.step()
    assert [o["data"] for o in plan.update if o["kind"] == "ConfigMap"] == [
        {"ca.crt": c.ca}]


def test_a_lead_whose_supervisor_passes_reports_on_gets_no_token() -> None:
    c = made(config=dataclasses.replace(ON, rank_supervisor_image="trainop:1"),
             spec={"runPolicy": {"restartScope": "Job", "restartInPlace": True}},
             replica_extra={rt: {"restartPolicy": "ExitCode", "template": {"spec": {
                 "containers": [{"name": "tensorflow", "image": "t",
                                 "command": ["python", "train.py"]}]}}}
                 for rt in ("Chief", "Worker")})
    main = c.pod("job-chief-0")["spec"]["containers"][0]
    assert "--progress" in main["command"]
    assert not any(e["name"].startswith("KUBEFLOW_TRAINER") for e in main["env"])
