"""The install's lists of kinds are generated from the declared kinds: the files config/
holds are what `trainop crds --config` writes, and the roles' rules on the jobs are the
generated ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from trainop.api import install
from trainop.cli import main

CONFIG = Path(__file__).resolve().parents[2] / "config"


def rules_on_jobs(path: Path, kind: str) -> list[dict[str, Any]]:
    role = next(d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == kind)
    return [r for r in role["rules"] if r["apiGroups"] == ["kubeflow.org"]]


def test_the_generated_files_are_the_checked_in_ones(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["crds", "--config", str(tmp_path)])
    assert out.exit_code == 0, out.output
    written = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()}
    assert {Path("crd/kustomization.yaml"), Path("webhook/manifests.yaml")} <= written
    drifted = [str(p) for p in sorted(written)
               if (CONFIG / p).read_text() != (tmp_path / p).read_text()]
    assert not drifted, "run: trainop crds --config config"


def test_the_crd_list_names_every_kinds_file() -> None:
    listed = yaml.safe_load((CONFIG / "crd/kustomization.yaml").read_text())["resources"]
    assert listed == [f"kubeflow.org_{p}.yaml" for p in (
        "tfjobs", "pytorchjobs", "mpijobs", "xgboostjobs", "paddlejobs", "jaxjobs", "mxjobs")]
    assert all((CONFIG / "crd" / name).is_file() for name in listed)


def test_the_roles_rules_on_the_jobs_are_the_generated_ones() -> None:
    generated = install.job_rules()
    assert rules_on_jobs(CONFIG / "rbac/cluster/role.yaml", "ClusterRole") == generated
    assert rules_on_jobs(CONFIG / "namespaced/role.yaml", "Role") == generated
    assert generated[1]["resources"][:2] == ["tfjobs/status", "pytorchjobs/status"]


def test_conflicting_destinations_are_one_readable_line(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["crds", "-o", str(tmp_path / "a"),
                                    "--config", str(tmp_path / "b")])
    assert out.exit_code == 2
    assert out.output.strip().splitlines()[-1] == \
        "trainop: --output-dir and --config write the CRDs to two places: give one"
    assert not list(tmp_path.iterdir())
