"""The differential suite's own rules (tests/differential/peers.py): how a difference is
read, which pattern of the README's table covers it, when a pattern is stale."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.differential.peers import (
    Answer,
    Ledger,
    Pattern,
    answer_difference,
    differences,
    normalise,
    parse,
    patterns,
    snapshot_differences,
    undocumented,
)

TESTS = Path(__file__).resolve().parents[1]
SUITE = [*(TESTS / "differential").glob("test_*.py"), TESTS / "node" / "test_beside_upstream.py"]
"""The scenarios compared with upstream: on test API servers, and on the real node."""

TABLE = """
| what | why | seen as |
|---|---|---|
| a | b | `*:a_job/MPIJob succeeded: event Normal X MPIJob/*: 1 != 0`, `?default:ttl f: x: 0 != 1` |
| c | d | |
"""


def test_a_row_gives_each_pattern_with_its_scope_and_row() -> None:
    found = parse(TABLE)
    assert [(p.text, p.row, p.optional) for p in found] == [
        ("*:a_job/MPIJob succeeded: event Normal X MPIJob/*: 1 != 0", "a", False),
        ("default:ttl f: x: 0 != 1", "a", True)]
    assert [p.scenarios for p in found] == [["a_job/MPIJob"], ["ttl"]]


@pytest.mark.parametrize("text", [
    "* .status.replicaStatuses.*.active: * != (none)",  # no scope at all
    "*:* created: x: 1 != 0",  # any scenario
    "default:* created: x: 1 != 0",  # any scenario of the default run
    "*:*succeeds/MPIJob created: x: 1 != 0",  # a scenario named by a wildcard
    "both:a_job created: x: 1 != 0",  # no such variant
    "*:{a_job,*b} created: x: 1 != 0",  # one of several scenarios named by a wildcard
])
def test_a_pattern_without_a_scope_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="scope"):
        parse(f"| a | b | `{text}` |")


def test_a_shipped_flags_difference_may_name_every_scenario_of_the_shipped_run() -> None:
    (p,) = parse("| a | b | `shipped:* *: pods/x .spec.y: 1 != 0` |")
    assert p.covers("a_job/MPIJob") and p.covers("ttl")
    assert p.matches("shipped:ttl done: pods/x .spec.y: 1 != 0")
    assert not p.matches("default:ttl done: pods/x .spec.y: 1 != 0")


def test_a_pattern_covers_its_scenario_variant_and_step_only() -> None:
    (p,) = parse("| a | b | `shipped:a_job/MPIJob succeeded: event Normal X MPIJob/job: 1 != 0` |")
    line = "shipped:a_job/MPIJob succeeded: event Normal X MPIJob/job: 1 != 0"
    assert p.matches(line)
    assert not p.matches(line.replace("shipped", "default"))
    assert not p.matches(line.replace("a_job/MPIJob", "a_job/TFJob"))
    assert not p.matches(line.replace("succeeded:", "running:"))
    assert not p.matches(line.replace("1 != 0", "2 != 0"))
    assert undocumented([line, line.replace("/MPIJob", "/TFJob")], [p]) == [
        line.replace("/MPIJob", "/TFJob")]


def test_a_pattern_may_name_several_scenarios() -> None:
    (p,) = parse("| a | b | `*:{a_job/MPIJob,every_example/mpi.yaml} *: roles/x: 1 != 0` |")
    assert p.scenarios == ["a_job/MPIJob", "every_example/mpi.yaml"]
    assert p.matches("default:a_job/MPIJob created: roles/x: 1 != 0")
    assert p.matches("shipped:every_example/mpi.yaml running: roles/x: 1 != 0")
    assert not p.matches("default:a_job/TFJob created: roles/x: 1 != 0")
    assert p.covers("every_example/mpi.yaml") and not p.covers("every_example/tf.yaml")


def test_a_pattern_that_matched_nothing_where_its_scenario_ran_is_stale() -> None:
    known = [Pattern("*:a_job/MPIJob s: x: 1 != 0", "row a"),
             Pattern("*:a_job/TFJob s: x: 1 != 0", "row b"),
             Pattern("*:b_job s: y: 1 != 0", "row c", optional=True),
             Pattern("*:c_job s: z: 1 != 0", "row d")]
    ledger = Ledger(lambda scenario: True, every_scenario=True)
    ledger.record("a_job/MPIJob", ["default:a_job/MPIJob s: x: 1 != 0"], known)
    ledger.record("a_job/TFJob", [], known)
    ledger.record("b_job", [], known)
    # a_job/TFJob ran and its pattern matched nothing; b_job's is optional; c_job never ran
    assert ledger.stale(known) == ["*:a_job/TFJob s: x: 1 != 0 (row: row b...)"]


def test_a_pattern_of_every_shipped_scenario_is_judged_in_a_full_run_only() -> None:
    known = [Pattern("*:a_job s: x: 1 != 0", "row a"), Pattern("shipped:* *: y: 1 != 0", "b")]
    ledger = Ledger(lambda scenario: True, every_scenario=True)
    ledger.record("a_job", ["default:a_job s: x: 1 != 0"], known)
    assert ledger.stale(known) == ["shipped:* *: y: 1 != 0 (row: b...)"]  # a_job is all
    ledger.matched.clear()
    ledger.ran = {"other"}  # a_job did not run: not a full run
    assert ledger.stale(known) == []


def test_each_suite_judges_the_patterns_of_its_own_scenarios() -> None:
    known = [Pattern("*:a_job s: x: 1 != 0", "row a"), Pattern("shipped:* *: y: 1 != 0", "b"),
             Pattern("shipped:on_the_node_job s: z: 1 != 0", "row c")]
    api_servers = Ledger(lambda s: not s.startswith("on_the_node_"), every_scenario=True)
    api_servers.record("a_job", ["default:a_job s: x: 1 != 0"], known)
    # the node's scenario never runs here: the run is full all the same, and its pattern
    # is not judged
    assert api_servers.stale(known) == ["shipped:* *: y: 1 != 0 (row: b...)"]
    node = Ledger(lambda s: s.startswith("on_the_node_"), every_scenario=False)
    node.record("on_the_node_job", [], known)
    assert node.stale(known) == ["shipped:on_the_node_job s: z: 1 != 0 (row: row c...)"]


def test_the_normaliser_drops_only_what_differs_by_construction() -> None:
    binding = {"metadata": {"name": "j-launcher", "namespace": "d-1", "uid": "u",
                            "resourceVersion": "7", "creationTimestamp": "t",
                            "ownerReferences": [{"kind": "MPIJob", "name": "j", "uid": "u"}]},
               "subjects": [{"kind": "ServiceAccount", "name": "j", "namespace": "d-1"}],
               "status": {"startTime": "x", "nested": {"namespace": "d-1"}}}
    assert normalise(binding) == {
        "metadata": {"name": "j-launcher",
                     "ownerReferences": [{"kind": "MPIJob", "name": "j"}]},
        "subjects": [{"kind": "ServiceAccount", "name": "j", "namespace": "d-1"}],
        "status": {"startTime": "<time>", "nested": {"namespace": "d-1"}}}
    moved = {**binding, "subjects": [{"kind": "ServiceAccount", "name": "j",
                                      "namespace": "other"}]}
    assert snapshot_differences({"rolebindings/j": normalise(moved), "events": {}},
                                {"rolebindings/j": normalise(binding), "events": {}}) == [
        'rolebindings/j .subjects[0].namespace: "other" != "d-1"']


def test_a_snapshot_difference_names_objects_and_event_counts() -> None:
    ours = {"pods/a": {"x": 1}, "events": {"Normal R Pod/a: m": 2, "Warning W Job/j: n": 1}}
    theirs = {"pods/b": {}, "events": {"Normal R Pod/a: m": 1}}
    assert snapshot_differences(ours, theirs) == [
        "event Normal R Pod/a: m: 2 != 1", "event Warning W Job/j: n: 1 != 0",
        "pods/a: exists != (none)", "pods/b: (none) != exists"]


def test_a_text_that_goes_on_after_upstreams_says_what_it_adds() -> None:
    ours = {"message": "PyTorchJob job is failed. Last failure: pod x exited with code 3."}
    assert differences(ours, {"message": "PyTorchJob job is failed."}) == [
        '.message: "PyTorchJob job is failed." += " Last failure: pod x exited with code 3."']
    # not upstream's text first: a plain difference, which a `+=` pattern does not cover
    assert differences(ours, {"message": "PyTorchJob job has failed."}) == [
        '.message: "PyTorchJob job is failed. Last failure: pod x exited with code 3." != '
        '"PyTorchJob job has failed."']


DENY = 'Error from server (Forbidden): admission webhook "v.kb.io" denied the request: '


def test_a_webhook_answer_differs_in_its_words_only_after_the_same_path() -> None:
    up = Answer(False, DENY + "spec.x[0].image: Required value: must be required")
    same_path = Answer(False, DENY + "spec.x[0].image: is required")
    assert answer_difference("no image", same_path, up) == (
        f"no image: words after {DENY + 'spec.x[0].image: '!r}: \"is required\" != "
        '"Required value: must be required"')
    other_path = Answer(False, DENY + "spec.y: is required")
    assert answer_difference("no image", other_path, up) == (
        f"no image: message {other_path.message!r} != {up.message!r}")
    assert answer_difference("no image", Answer(True, ""), up) == (
        f"no image: allowed True != False ( | {up.message})")
    assert answer_difference("no image", up, up) is None


def _suite_tests() -> set[str]:
    names = set()
    for path in SUITE:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                names.add(node.name.removeprefix("test_"))
    return names


def test_every_readme_pattern_names_a_scenario_of_the_suite() -> None:
    known = patterns()
    assert known, "the README's differences table has no pattern"
    tests = _suite_tests()
    unnamed = [p.text for p in known for s in p.scenarios
               if s != "*" and s.split("/")[0] not in tests]
    assert not unnamed, f"patterns naming no scenario of the suite: {unnamed}"


SUCCEEDS = "default:a_job_that_succeeds/MPIJob"
GANG = "default:a_gang_job_gets_its_pod_group_and_runs/volcano"


@pytest.mark.parametrize("line", [
    f"{SUCCEEDS} succeeded: MPIJob/job .status.replicaStatuses.Worker.succeeded: 2 != (none)",
    f"{GANG} succeeded: event Normal JobTerminated PyTorchJob/job: Job has been terminated. "
    "Deleting PodGroup: 1 != 4",
    f"{SUCCEEDS} running: event Normal SuccessfulCreatePod MPIJob/job: Created pod: "
    "job-launcher: 1 != 0",
    f"{SUCCEEDS} running: serviceaccounts/job-launcher .metadata.labels.training.kubeflow.org/"
    'job-name: "job" != (none)',
    f"{SUCCEEDS} succeeded: roles/job-launcher: (none) != exists",
    "shipped:exit_code_retries_a_retryable_code_and_fails_on_another failed: PyTorchJob/job "
    '.status.completionTime: "<time>" != (none)',
])
def test_the_readmes_patterns_cover_their_differences(line: str) -> None:
    assert undocumented([line], patterns()) == []


@pytest.mark.parametrize("line", [
    # the MPIJob's worker count while it runs, or another count
    f"{SUCCEEDS} running: MPIJob/job .status.replicaStatuses.Worker.succeeded: 2 != (none)",
    f"{SUCCEEDS} succeeded: MPIJob/job .status.replicaStatuses.Worker.succeeded: 1 != (none)",
    # a PodGroup deleted without its event, or told twice
    f"{GANG} succeeded: event Normal JobTerminated PyTorchJob/job: Job has been terminated. "
    "Deleting PodGroup: 0 != 4",
    f"{GANG} succeeded: event Normal SuccessfulDeletePodGroup PyTorchJob/job: Deleted "
    "PodGroup: job: 2 != 4",
    # a launcher made twice
    f"{SUCCEEDS} running: event Normal SuccessfulCreatePod MPIJob/job: Created pod: "
    "job-launcher: 2 != 0",
    # a wrong label value, a label of upstream's trainop lacks
    f"{SUCCEEDS} running: serviceaccounts/job-launcher .metadata.labels.training.kubeflow.org/"
    'job-name: "other" != (none)',
    f"{SUCCEEDS} running: configmaps/job-config .metadata.labels.training.kubeflow.org/"
    'operator-name: "pytorchjob-controller" != (none)',
    f"{SUCCEEDS} running: roles/job-launcher .metadata.labels.training.kubeflow.org/"
    'job-role: (none) != "launcher"',
    # a launcher Role never made while the job runs
    f"{SUCCEEDS} running: roles/job-launcher: (none) != exists",
    # a completion time while the job has not failed
    "default:exit_code_retries_a_retryable_code_and_fails_on_another running: PyTorchJob/job "
    '.status.completionTime: "<time>" != (none)',
])
def test_the_readmes_patterns_do_not_cover_a_bug_beside_their_difference(line: str) -> None:
    assert undocumented([line], patterns()) == [line]
