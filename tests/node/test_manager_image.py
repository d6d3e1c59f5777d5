"""The image the node suite deploys is the Dockerfile's, built by a real image builder: what
users build is what the suite runs. It holds the product and its pinned requirements, and
neither the test harness nor the tests."""

from __future__ import annotations

import json
import tarfile
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SITE = "usr/local/lib/python3.11/site-packages"


def read(archive: Path) -> tuple[list[str], dict[str, Any], set[str]]:
    """The image's tags, its config and every path of its layers."""
    with tarfile.open(archive) as outer:
        manifest = json.load(outer.extractfile("manifest.json"))[0]  # type: ignore[arg-type]
        config = json.load(outer.extractfile(manifest["Config"]))  # type: ignore[arg-type]
        paths: set[str] = set()
        for layer in manifest["Layers"]:
            with tarfile.open(fileobj=outer.extractfile(layer)) as inner:
                paths |= {n.lstrip("./") for n in inner.getnames()}
    return manifest["RepoTags"], config, paths


def test_the_deployed_image_is_built_from_the_dockerfile(manager_archive: Path) -> None:
    tags, config, paths = read(manager_archive)
    assert "docker.io/library/trainop:0.1.0" in tags  # config/default's image
    run = config["config"]
    assert run["Entrypoint"] == ["trainop", "manager"] and run["User"] == "65532:65532"
    assert set(run["ExposedPorts"]) == {"8080/tcp", "8081/tcp", "9443/tcp"}
    steps = [h.get("created_by", "") for h in config["history"]]
    assert any(s.endswith("pip install . && rm -rf /src") for s in steps), steps
    # the product, its package data, its command, and its pinned requirements
    assert f"{SITE}/trainop/cluster/manager.py" in paths
    assert f"{SITE}/trainop/api/kubeschema.json" in paths
    assert "usr/local/bin/trainop" in paths
    assert "usr/local/bin/trainop-supervisor" in paths  # built in the Dockerfile's Go stage
    pins = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    for pin in pins:
        name, version = pin.split("==")
        dist = f"{name.replace('-', '_').lower()}-{version}.dist-info"
        assert any(p.lower().startswith(f"{SITE}/{dist}") for p in paths), pin
    # nothing of the harness, the tests or the build's context left behind
    assert not [p for p in paths if p.startswith((f"{SITE}/testbed", f"{SITE}/tests", "src/"))]
