"""The `trainop` command line."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import yaml

from trainop import __version__
from trainop.api import InvalidJob, ManifestError, load_job, read_documents
from trainop.api.crd import all_crds


def _fail(message: str, code: int = 2) -> None:
    click.echo(f"trainop: {message}", err=True)
    sys.exit(code)


def _dump_yaml(obj: object) -> str:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="trainop")
def main() -> None:
    """trainop runs kubeflow.org/v1 training jobs (TFJob, PyTorchJob, MPIJob, XGBoostJob,
    PaddleJob, JAXJob, MXJob): on this machine as processes, or on Kubernetes."""


@main.command()
@click.option("--output-dir", "-o", type=click.Path(file_okay=False, path_type=Path),
              help="Write one file per kind into this folder instead of printing them.")
def crds(output_dir: Path | None) -> None:
    """Print the CustomResourceDefinitions of every job kind (generated from the API)."""
    generated = all_crds()
    if output_dir is None:
        click.echo("---\n".join(_dump_yaml(c) for c in generated.values()), nl=False)
        return
    output_dir.mkdir(parents=True, exist_ok=True)
    for name, crd in generated.items():
        (output_dir / name).write_text(_dump_yaml(crd))
    click.echo(f"wrote {len(generated)} CRDs to {output_dir}")


@main.command("validate")
@click.argument("file", default="-")
@click.option("--show-defaults", is_flag=True, help="Print each job as defaulted.")
def validate_cmd(file: str, show_defaults: bool) -> None:
    """Check the jobs in FILE ('-' for stdin) as the manager would; exit 1 when invalid."""
    try:
        docs = read_documents(file)
    except ManifestError as err:
        _fail(str(err))
    failed = False
    for doc in docs:
        name = (doc.get("metadata") or {}).get("name", "?") if isinstance(doc, dict) else "?"
        try:
            job = load_job(doc)
        except InvalidJob as err:
            failed = True
            for problem in err.problems:
                click.echo(f"{doc.get('kind', '?')}/{name}: {problem}", err=True)
            continue
        if show_defaults:
            click.echo("---\n" + _dump_yaml(job.to_dict()), nl=False)
        else:
            click.echo(f"{job.kind}/{job.name}: valid")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
