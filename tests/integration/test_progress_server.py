"""Trainer's progress route (--progress-server) on a real API server: the lead pod's
variables and files, tokens the API server mints and reviews, a report POSTed by
trainop.progress reaching the job's status, and every attempt to report for a job one is
not the lead pod of refused."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testbed.apiserver import TestAPIServer
from tests.integration.kube import Kube, Manager, wait_for
from tests.jobs import manifest
from trainop.cluster.reading.client import Client
from trainop.cluster.reading.config import from_kubeconfig
from trainop.cluster.reading.reports import HeardReports
from trainop.cluster.serving.progress_server import ProgressServer
from trainop.local.ports import free_port

pytestmark = pytest.mark.integration

SA = "runner"
WITH_SA = {rt: {"template": {"spec": {"serviceAccountName": SA, "containers": [
    {"name": "tensorflow", "image": "trainer"}]}}} for rt in ("Chief", "Worker")}


class Route:
    """The manager's progress route, and tokens to call it with."""

    def __init__(self, kube: Kube, port: int, certs: Path) -> None:
        self.kube, self.port, self.certs = kube, port, certs

    def url(self, job: str = "job", plural: str = "tfjobs", ns: str | None = None) -> str:
        return (f"https://127.0.0.1:{self.port}/apis/kubeflow.org/v1/namespaces/"
                f"{ns or self.kube.ns}/{plural}/{job}/progress")

    def token(self, pod: str, audience_job: str = "job", ns: str | None = None) -> str:
        ns = ns or self.kube.ns
        uid = json.loads(self.kube.api.kubectl("get", "pod", pod, "-n", ns, "-o", "json"
                                               ).stdout)["metadata"]["uid"]
        return self.kube.api.kubectl(
            "create", "token", SA, "-n", ns, "--audience",
            f"trainop.kubeflow.org/{self.kube.ns}/tfjobs/{audience_job}",
            "--bound-object-kind", "Pod", "--bound-object-name", pod,
            "--bound-object-uid", uid).stdout.strip()

    def post(self, body: bytes | dict[str, Any], token: str | None, url: str | None = None
             ) -> tuple[int, dict[str, Any]]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        request = urllib.request.Request(url or self.url(), data=data, method="POST",
                                         headers=headers)
        context = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())


@pytest.fixture
def route(kube: Kube, start_manager: Callable[..., Manager], tmp_path: Path) -> Route:
    port = free_port()
    certs = tmp_path / "certs"
    start_manager("--webhook-port", str(port), "--webhook-cert-dir", str(certs),
                  "--webhook-service-name", "trainop-webhook",
                  "--webhook-service-namespace", kube.ns,
                  "--webhook-secret-name", "trainop-webhook-cert",
                  "--progress-server", "--progress-interval", "1")
    kube.kubectl("create", "serviceaccount", SA)
    return Route(kube, port, certs)


def report(percent: int) -> dict[str, Any]:
    return {"trainerStatus": {"progressPercentage": percent,
                              "lastUpdatedTime": "2026-12-07T00:00:00Z"}}


def running(kube: Kube, name: str = "job") -> None:
    kube.apply(manifest("TFJob", {"Chief": 1, "Worker": 1}, name=name,
                        namespace=kube.ns, replica_extra=WITH_SA) | {"metadata": {
                            "name": name, "namespace": kube.ns}})
    wait_for(f"{name}'s pods", lambda: len([
        p for p in kube.items("pods") if p["metadata"]["name"].startswith(f"{name}-")]) == 2
        or None)


def test_the_lead_pod_reports_with_trainers_variables_and_the_status_shows_it(
        kube: Kube, route: Route, tmp_path: Path) -> None:
    running(kube)
    chief = kube.get("pod", "job-chief-0")
    env = {e["name"]: e["value"] for e in chief["spec"]["containers"][0]["env"]
           if "value" in e}
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
        f"https://trainop-webhook.{kube.ns}.svc/apis/kubeflow.org/v1/namespaces/{kube.ns}/"
        "tfjobs/job/progress")
    worker = kube.get("pod", "job-worker-0")
    assert not any(e["name"].startswith("KUBEFLOW_TRAINER")
                   for e in worker["spec"]["containers"][0].get("env") or [])
    # the CA it mounts is the one the manager serves with
    ca = kube.get("configmap", "job-trainop-progress-ca")["data"]["ca.crt"]
    assert ca == (route.certs / "ca.crt").read_text()
    # the helper, as the pod's process would run it: the files the kubelet would project
    (tmp_path / "token").write_text(route.token("job-chief-0"))
    out = subprocess.run(
        [sys.executable, "-c", "from trainop import progress\n"
         "progress.report(step=40, steps=100, metrics={'loss': 0.25})\n"],
        env={**os.environ, "KUBEFLOW_TRAINER_SERVER_URL": route.url(),
             "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(route.certs / "ca.crt"),
             "KUBEFLOW_TRAINER_SERVER_TOKEN": str(tmp_path / "token")},
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    shown = wait_for("the progress", lambda: kube.job("TFJob", "job")["status"].get(
        "progress"))
    assert {k: v for k, v in shown.items() if k != "lastReportedTime"} == {
        "percent": 40, "step": 40, "steps": 100,
        "metrics": [{"name": "loss", "value": "0.25"}], "pod": "job-chief-0"}


def test_every_report_for_a_job_one_is_not_the_pod_of_is_refused(
        kube: Kube, route: Route) -> None:
    running(kube)
    running(kube, "other")
    # a pod of the tenant's own, which projects a token of the victim job's audience
    kube.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "intruder", "namespace": kube.ns}, "spec": {
        "serviceAccountName": SA, "containers": [{"name": "c", "image": "x"}]}})
    elsewhere = Kube(kube.api)
    elsewhere.kubectl("create", "serviceaccount", SA)
    elsewhere.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "job-chief-0", "namespace": elsewhere.ns}, "spec": {
        "serviceAccountName": SA, "containers": [{"name": "c", "image": "x"}]}})
    forbidden = [
        route.post(report(10), None),  # no token
        route.post(report(10), route.token("other-chief-0", "other")),  # another job's
        route.post(report(10), route.token("job-chief-0"), route.url("other")),  # and back
        route.post(report(10), route.token("intruder")),  # the audience, not the pod
        route.post(report(10), route.token("job-chief-0", ns=elsewhere.ns)),  # same name
        route.post(report(10), "not-a-token"),
    ]
    assert [code for code, _ in forbidden] == [403] * 6, forbidden
    assert forbidden[3][1]["message"] == "Forbidden: the token is not of a pod of this job"
    token = route.token("job-chief-0")
    assert route.post(report(10), token, route.url(plural="widgets"))[0] == 404
    assert route.post(report(10), token, route.url("gone"))[0] == 404
    assert route.post(b"{" + b" " * (64 << 10) + b"}", token)[0] == 413
    code, answer = route.post(report(101), token)
    assert (code, answer["message"]) == (
        422, "Invalid payload: progressPercentage is not a whole number from 0 to 100")
    assert route.post(b"{", token)[0] == 422
    # nothing of all that reached the job
    assert "progress" not in kube.job("TFJob", "job")["status"]
    # the lead pod's: taken; one more within the second: refused, said to come back
    assert route.post(report(20), token) == (200, report(20))
    code, answer = route.post(report(21), token)
    assert code == 429 and answer["message"] == "Too many reports: one a job every 1 s"
    wait_for("the progress", lambda: (kube.job("TFJob", "job")["status"].get("progress")
                                      or {}).get("percent") == 20 or None)


def test_a_flood_of_unknown_tokens_never_keeps_the_jobs_pod_out(
        kube: Kube, route: Route, apiserver: TestAPIServer) -> None:
    """2,000 reports of tokens no one minted at once: a few reviews at a time reach the
    API server, the rest are answered busy; the lead pod's token, once found good, has
    reviews of its own even after its review is forgotten."""
    running(kube)
    token = route.token("job-chief-0")
    audience = f"trainop.kubeflow.org/{kube.ns}/tfjobs/job"

    async def scenario() -> tuple[list[object], object]:
        client = Client(from_kubeconfig(str(apiserver.kubeconfig)))
        try:
            server = ProgressServer(client, HeardReports(None))
            pod = await server._review(token, audience)
            server._reviews.clear()  # its review forgotten: it must be asked again
            flood = [asyncio.ensure_future(server._review(uuid.uuid4().hex, audience))
                     for _ in range(2000)]
            await asyncio.sleep(0)  # the flood holds the unknown tokens' slots
            during = await server._review(token, audience)
            return [pod, during], list(await asyncio.gather(*flood))
        finally:
            await client.close()

    (pod, during), answers = asyncio.run(scenario())
    uid = kube.get("pod", "job-chief-0")["metadata"]["uid"]
    assert pod == during == ("job-chief-0", uid)
    assert set(answers) <= {None, "busy"} and answers.count("busy") > 1900, set(answers)
