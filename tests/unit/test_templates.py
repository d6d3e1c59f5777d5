"""Walking a pod or template's containers: one helper, tolerant of missing fields."""

from __future__ import annotations

from typing import Any

import pytest

from trainop.api.templates import container, containers, main_container

POD = {"spec": {"containers": [{"name": "sidecar"}, {"name": "pytorch", "image": "i"}]}}


@pytest.mark.parametrize(("obj", "names"), [
    (POD, ["sidecar", "pytorch"]), (None, []), ({}, []), ({"spec": None}, []),
    ({"spec": {"containers": None}}, []), ({"spec": {"containers": [3, {"name": "a"}]}}, ["a"]),
], ids=["pod", "none", "empty", "no-spec", "no-containers", "junk-entries"])
def test_containers(obj: dict[str, Any] | None, names: list[str]) -> None:
    assert [c.get("name") for c in containers(obj)] == names


def test_main_container_by_name_else_the_first() -> None:
    assert container(POD, "pytorch") == {"name": "pytorch", "image": "i"}
    assert container(POD, "tensorflow") is None
    assert main_container(POD, "tensorflow") == {"name": "sidecar"}
    assert main_container({}, "pytorch") is None
