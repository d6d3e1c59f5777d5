"""One nesting limit for every job: deep documents are read, cut, and the job refused."""

from __future__ import annotations

import json

import orjson
import pytest

from tests.jobs import manifest
from trainop.api import InvalidJob, load_job, parse_job
from trainop.api.nesting import MAX_DEPTH, TOO_DEEP, deepest, loads


def nested(levels: int, inner: str = "1") -> str:
    return "[" * levels + inner + "]" * levels


def depth_of(value: object) -> int:
    levels = 0
    while isinstance(value, list):
        value, levels = value[0] if value else None, levels + 1
    return levels


def test_a_document_within_orjsons_limit_is_read_whole() -> None:
    assert loads(b'{"a": [1, 2.5, true, null, "x", {}]}') == {"a": [1, 2.5, True, None, "x", {}]}
    assert depth_of(loads(nested(1000))) == 1000


def test_past_orjsons_limit_the_deep_containers_are_cut_and_the_rest_kept() -> None:
    doc = loads('{"items": [{"a": ' + nested(5000) + ', "b": 2.5}, {"c": [1, "x"]}],'
                ' "metadata": {"continue": ""}}')
    first, second = doc["items"]
    assert second == {"c": [1, "x"]} and first["b"] == 2.5
    assert doc["metadata"] == {"continue": ""}
    # items (2), its first entry (3) and the list under "a" from level 4 up to the limit
    assert depth_of(first["a"]) == MAX_DEPTH - 3
    inner = first["a"]
    while isinstance(inner[0], list):
        inner = inner[0]
    assert inner == [TOO_DEEP]


def test_what_is_not_json_stays_an_error() -> None:
    for raw in (b"not json", b"[" * 5000, b'{"a": ' + b"[" * 3000 + b"}"):
        with pytest.raises(orjson.JSONDecodeError):
            loads(raw)


def test_deepest_names_the_first_container_past_the_limit() -> None:
    assert deepest({"a": [{"b": 1}], "c": "x"}) is None
    assert deepest(json.loads(nested(MAX_DEPTH))) is None
    assert deepest(json.loads(nested(MAX_DEPTH + 1))) == (0,) * MAX_DEPTH
    assert deepest({"spec": {"x": loads(nested(3000))}}) == ("spec", "x", *(0,) * (MAX_DEPTH - 2))
    assert deepest(TOO_DEEP) == ()


@pytest.mark.parametrize("levels", [MAX_DEPTH, 3000])
def test_a_job_nested_too_deep_is_invalid_with_a_short_path(levels: int) -> None:
    job = manifest("MPIJob", {"Launcher": 1, "Worker": 1})
    text = json.dumps(job).replace('"Launcher": {', '"Launcher": {"deep": ' + nested(levels)
                                   + ", ", 1)
    for check in (parse_job, load_job):
        with pytest.raises(InvalidJob) as err:
            check(loads(text))
        (problem,) = err.value.problems
        assert problem.message == f"is nested more than {MAX_DEPTH} levels deep"
        assert problem.path.startswith("spec.mpiReplicaSpecs[Launcher].deep[0][0]")
        assert len(problem.path) <= 133


def test_a_job_just_within_the_limit_is_judged_as_any_other() -> None:
    job = manifest("MPIJob", {"Launcher": 1, "Worker": 1})
    spec = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    spec["containers"][0]["name"] = "launcher"
    levels = MAX_DEPTH - 8  # the container's map is at level 8
    spec["containers"][0]["futureField"] = json.loads(nested(levels - 1, "[]"))
    assert load_job(job).kind == "MPIJob"
    spec["containers"][0]["futureField"] = json.loads(nested(levels, "[]"))
    with pytest.raises(InvalidJob, match="is nested more than 100 levels deep"):
        load_job(job)
