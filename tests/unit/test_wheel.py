"""What a user installs is the product: the wheel built from this checkout holds the
trainop package and its data, and none of the test harness (testbed/) or the tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_the_product_only(tmp_path: Path) -> None:
    # built from a copy of the checkout's sources: setuptools builds in the tree and would
    # reuse a build/ folder an earlier build left there
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "runs", "*.egg-info", "__pycache__", ".*_cache",
        ".hypothesis", "bench"))
    # the installed setuptools, no build isolation: no download
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(tmp_path), str(source)], check=True,
                   capture_output=True, text=True, timeout=300)
    (wheel,) = tmp_path.glob("trainop-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "trainop/cluster/manager.py" in names
    assert "trainop/api/kubeschema.json" in names  # package data
    assert "trainop/examples/pytorch-ddp.yaml" in names
    tops = {n.split("/")[0] for n in names if not n.startswith("trainop-")}
    assert tops == {"trainop"}, tops  # no testbed, no tests, no bench
