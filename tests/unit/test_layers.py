"""The tree's layers: each package imports only those below it. The engine is pure (no
runtime under it), a plugin never reaches a runtime, and the two runtimes never reach each
other: what one needs of the other belongs lower down."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TRAINOP = Path(__file__).resolve().parents[2] / "trainop"
LAYERS = {
    "wallclock": 0, "api": 0,
    "engine": 1,
    "frameworks": 2,
    "local": 3, "cluster": 3,
    "manager_flags": 4, "cli": 5, "__init__": 0, "terminal": 0, "progress": 0,
}
"""Each top-level module or package of trainop, by layer: one may import only a lower
layer (or itself)."""


CLUSTER = {
    "__init__": 0, "options": 0, "allocator": 0, "fairqueue": 0, "parts": 0,
    "reading": 1,
    "serving": 2, "acting": 2, "leader": 2,
    "manager": 3,
}
"""The concerns inside cluster/, by layer: reading the API under serving and acting (which
never reach each other), the manager process over them all."""


def imports(path: Path, depth: int = 1) -> set[str]:
    """The top-level trainop modules or packages that `path` imports (`depth` 2: those
    inside trainop/cluster/ it imports)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "trainop" else [
                f"trainop.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        if depth == 1:
            out |= {_module(n.split(".")[1]) for n in names if n.startswith("trainop.")}
        else:  # `from trainop.cluster import x` names x as a module
            if isinstance(node, ast.ImportFrom) and node.module == "trainop.cluster":
                names = [f"trainop.cluster.{a.name}" for a in node.names]
            out |= {_module(n.split(".")[2], TRAINOP / "cluster") for n in names
                    if n.startswith("trainop.cluster.")}
    return out


def _module(name: str, within: Path = TRAINOP) -> str:
    """`name` of `trainop.name` (or of `trainop.cluster.name`), or "__init__" where it is a
    name the package's __init__.py defines (`from trainop import __version__`)."""
    here = within / name
    return name if here.is_dir() or here.with_suffix(".py").is_file() else "__init__"


def layer_of(path: Path, within: Path = TRAINOP) -> str:
    return path.relative_to(within).parts[0].removesuffix(".py")


def crossings(files: dict[Path, str], layers: dict[str, int] = LAYERS,
              depth: int = 1) -> list[str]:
    """`file -> package` for every import of a file (by its layer's name) that does not
    go down, or stay."""
    return [f"{path.name} -> {dst}" for path, src in files.items()
            for dst in sorted(imports(path, depth)) if dst != src and layers[dst] >= layers[src]]


def test_every_import_goes_down_a_layer() -> None:
    files = {p: layer_of(p) for p in sorted(TRAINOP.rglob("*.py"))}
    assert set(files.values()) <= LAYERS.keys()  # a new package takes a layer first
    assert crossings(files) == []


def test_inside_the_cluster_runtime_every_import_goes_down_a_concern() -> None:
    within = TRAINOP / "cluster"
    files = {p: layer_of(p, within) for p in sorted(within.rglob("*.py"))}
    assert set(files.values()) <= CLUSTER.keys()  # a new module takes a layer first
    assert crossings(files, CLUSTER, depth=2) == []


@pytest.mark.parametrize(("layer", "source", "bad"), [
    ("engine", "from trainop.cluster.reading.client import APIClient\n", "cluster"),
    ("api", "import trainop.engine.plan\n", "engine"),
    ("local", "from trainop import cluster\n", "cluster"),
    ("cluster", "from trainop.local.runner import Runner\n", "local"),
    ("frameworks", "from trainop.cli import main\n", "cli")])
def test_an_import_up_or_across_is_caught(tmp_path: Path, layer: str, source: str,
                                          bad: str) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(f"from trainop.api import Job\n{source}")
    assert crossings({probe: layer}) == [f"probe.py -> {bad}"]


@pytest.mark.parametrize(("concern", "source", "bad"), [
    ("reading", "from trainop.cluster.acting.events import EventRecorder\n", "acting"),
    ("acting", "from trainop.cluster.serving import webhook\n", "serving"),
    ("serving", "from trainop.cluster import manager\n", "manager"),
    ("acting", "import trainop.cluster.leader\n", "leader")])
def test_an_import_up_or_across_inside_the_cluster_runtime_is_caught(
        tmp_path: Path, concern: str, source: str, bad: str) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(f"from trainop.cluster.reading.client import Client\n{source}")
    assert crossings({probe: concern}, CLUSTER, depth=2) == [f"probe.py -> {bad}"]
