"""Make the Kubernetes types' CRD schemas from the Kubernetes API types, into trainop/api/.

`python -m testbed.kubeschema` (what `make crds` runs first) writes a Go package
whose one type holds a PodTemplateSpec, an autoscaling/v2 MetricSpec and a LabelSelector,
requires k8s.io/api and k8s.io/apimachinery of the release the suites run, and runs
controller-gen (the generator upstream's CRDs come from, built by hack/test-assets.sh) on
it, as upstream runs it (embedded ObjectMeta included). The three schemas go to
trainop/api/kubeschema.json, from which `trainop crds` makes the job CRDs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from testbed.apiserver import find_assets, release
from trainop.api.kubeschema import ROOTS, SCHEMAS_FILE

FIELDS = {
    "template": "io.k8s.api.core.v1.PodTemplateSpec",
    "metrics": "io.k8s.api.autoscaling.v2.MetricSpec",
    "selector": "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
}
"""Field of the generated type -> the Kubernetes type it holds (metrics: its items)."""

SOURCE = """\
// Package schema holds one type embedding the Kubernetes types the job CRDs use.
// +groupName=schema.trainop.local
// +versionName=v1
package schema

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true
type Types struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Template corev1.PodTemplateSpec      `json:"template"`
	Metrics  []autoscalingv2.MetricSpec  `json:"metrics"`
	Selector *metav1.LabelSelector       `json:"selector"`
}
"""


def controller_gen() -> Path:
    """controller-gen of the release hack/test-assets.sh builds
    ($TRAINOP_CONTROLLER_TOOLS_VERSION)."""
    return find_assets() / f"controller-gen-{release('controller_tools')}"


def generate(kube_version: str) -> dict[str, Any]:
    """What kubeschema.json holds, for Kubernetes `kube_version` (v1.X.Y)."""
    api_version = "v0." + kube_version.removeprefix("v1.")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    with tempfile.TemporaryDirectory(prefix="trainop-kubeschema-") as tmp:
        work = Path(tmp)
        (work / "schema").mkdir()
        (work / "schema" / "types.go").write_text(SOURCE)
        (work / "go.mod").write_text(
            "module trainop.local/kubeschema\n\ngo 1.26\n\nrequire (\n"
            f"\tk8s.io/api {api_version}\n\tk8s.io/apimachinery {api_version}\n)\n")
        def run(*args: str) -> None:
            subprocess.run(args, cwd=work, env=env, check=True, stdout=sys.stderr)
        run("go", "mod", "tidy")
        run(str(controller_gen()), "crd:generateEmbeddedObjectMeta=true",
            "paths=./schema/...", "output:crd:dir=out")
        (crd_file,) = (work / "out").glob("*.yaml")
        crd = yaml.safe_load(crd_file.read_text())
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    schemas = {
        FIELDS["template"]: props["template"],
        FIELDS["metrics"]: props["metrics"]["items"],
        FIELDS["selector"]: props["selector"],
    }
    assert set(schemas) == set(ROOTS), "kubeschema.ROOTS and FIELDS disagree"
    return {"release": kube_version, "generator": controller_gen().name, "schemas": schemas}


def main() -> int:
    data = generate(release())
    SCHEMAS_FILE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"{SCHEMAS_FILE}: {', '.join(data['schemas'])} of Kubernetes {data['release']}, "
          f"by {data['generator']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
