"""The `trainop` command line."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Any

import click
import yaml

from trainop import __version__
from trainop.api import InvalidJob, ManifestError, load_job, read_documents
from trainop.api.crd import all_crds
from trainop.api.manifest import parse_documents


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


DEFAULT_JOB = "pytorch-ddp.yaml"


def _pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            _fail(f"{what} {value!r}: expected KEY=VALUE")
        out[key] = val
    return out


def _read_one_job(file: str | None) -> tuple[dict[str, Any], str]:
    if file is None:
        source = resources.files("trainop") / "examples" / DEFAULT_JOB
        docs = parse_documents(source.read_text(), DEFAULT_JOB)
        where = f"the built-in example {DEFAULT_JOB}"
    else:
        docs = read_documents(file)
        where = file
    if len(docs) != 1:
        _fail(f"{where}: holds {len(docs)} documents; trainop run runs one job")
    return docs[0], where


@main.command()
@click.argument("file", required=False)
@click.option("--replicas", "replicas", multiple=True, metavar="TYPE=N",
              help="Override a replica count, e.g. --replicas Worker=3.")
@click.option("--env", "env", multiple=True, metavar="K=V",
              help="Add an environment variable to every replica.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path),
              help="Run folder: replicas' working directory and one log file per replica "
                   "[default: ./runs/JOB-TIMESTAMP].")
@click.option("--timeout", type=click.FloatRange(min=0), help="Stop everything after SECONDS.")
@click.option("--dry-run", is_flag=True, help="Show what would run (commands, env); run nothing.")
@click.option("--live/--no-live", default=None,
              help="Live table of replicas [default: when stdout is a terminal].")
def run(file: str | None, replicas: tuple[str, ...], env: tuple[str, ...],
        workdir: Path | None, timeout: float | None, dry_run: bool, live: bool | None) -> None:
    """Run a job's replicas as processes on this machine, through the same engine as the
    cluster. FILE is a job manifest ('-' for stdin); without it, the built-in PyTorch DDP
    example runs. Exit status: 0 Succeeded, 1 Failed, 2 bad input, 124 timed out,
    130 interrupted."""
    from trainop.local.cli import run_job

    try:
        doc, where = _read_one_job(file)
    except ManifestError as err:
        _fail(str(err))
    overrides = _pairs(replicas, "--replicas")
    code = run_job(doc, where, overrides, _pairs(env, "--env"), workdir, timeout, dry_run, live)
    sys.exit(code)


if __name__ == "__main__":
    main()
