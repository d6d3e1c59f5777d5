"""The `trainop` command line."""

from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

import click
import yaml

from trainop import __version__, manager_flags
from trainop.api import (
    KINDS,
    InvalidJob,
    ManifestError,
    install,
    load_job,
    read_documents,
    validate_update,
)
from trainop.api.crd import all_crds
from trainop.api.kinds import OTHER_VERSIONS
from trainop.api.manifest import parse_documents
from trainop.api.persona import PERSONAS
from trainop.api.resolved import resolve
from trainop.api.types import Defaulted
from trainop.engine import EngineConfig, gang, supervised
from trainop.frameworks.registry import framework_of


def _fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"trainop: {message}", err=True)
    sys.exit(code)


_KUBECONFIG = click.option("--kubeconfig", help="Kubeconfig file [default: in-cluster, else "
                                                "$KUBECONFIG or ~/.kube/config].")


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
@click.option("--config", "config_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write every file of the install generated from the kinds into this "
                   "kustomize folder (config/): crd/ (the CRDs and their list) and "
                   "webhook/manifests.yaml.")
def crds(output_dir: Path | None, config_dir: Path | None) -> None:
    """Print the CustomResourceDefinitions of every job kind (generated from the API)."""
    generated = all_crds()
    if output_dir is not None and config_dir is not None:
        _fail("--output-dir and --config write the CRDs to two places: give one")
    files = {Path(name): _dump_yaml(crd) for name, crd in generated.items()}
    if config_dir is not None:
        files = {**{Path("crd") / name: text for name, text in files.items()},
                 **{Path(name): text for name, text in install.generated().items()}}
    folder = output_dir or config_dir
    if folder is None:
        click.echo("---\n".join(files.values()), nl=False)
        return
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    click.echo(f"wrote {len(generated)} CRDs to {folder}"
               + (" and the install's lists of kinds" if config_dir is not None else ""))


@main.command("validate")
@click.argument("file", default="-")
@click.option("--show-defaults", is_flag=True, help="Print each job as defaulted.")
@click.option("--old", "old_file", metavar="STORED",
              help="Judge FILE as an update of the job in STORED (e.g. `kubectl get -o "
                   "yaml`), as the admission webhook does: immutable fields included.")
@click.option("--restart-in-place", is_flag=True,
              help="As the manager's flag: say how whole-job restarts go where it is on.")
@click.option("--rank-supervisor-image", metavar="IMAGE",
              help="As the manager's flag: say how whole-job restarts go where it is set.")
@click.option("--gang-scheduler-name", metavar="NAME",
              help="As the manager's flag: say how the job's pods are ganged, and what the "
                   "cluster needs for it.")
def validate_cmd(file: str, show_defaults: bool, old_file: str | None,
                 restart_in_place: bool, rank_supervisor_image: str | None,
                 gang_scheduler_name: str | None) -> None:
    """Check the jobs in FILE ('-' for stdin) as the manager would; exit 1 when invalid.
    For a job that restarts as a whole (restartScope Job), say how each replica type's
    pods restart, and why, and how its pods are ganged, under the manager's flags given
    here (of a job judged new: not with --old)."""
    try:
        docs = read_documents(file)
        old = read_documents(old_file) if old_file else None
    except ManifestError as err:
        _fail(str(err))
    if old is not None and (len(old) != 1 or len(docs) != 1):
        _fail("--old: FILE and STORED must hold one job each")
    failed = False
    for doc in docs:
        meta = doc.get("metadata")
        name = meta.get("name", "?") if isinstance(meta, dict) else "?"
        # (a job judged as an update may be one stored before today's rules, not defaulted:
        # how it restarts is said of a new one)
        defaulted: Defaulted | None = None
        try:
            job = validate_update(old[0], doc) if old else (defaulted := load_job(doc))
        except InvalidJob as err:
            failed = True
            for problem in err.problems:
                click.echo(f"{doc.get('kind', '?')}/{name}: {problem}", err=True)
            continue
        if show_defaults:
            click.echo("---\n" + _dump_yaml(job.to_dict()), nl=False)
        else:
            click.echo(f"{job.kind}/{job.name}: valid")
            if defaulted is not None:
                config = EngineConfig(restart_in_place=restart_in_place,
                                      rank_supervisor_image=rank_supervisor_image,
                                      gang_scheduler=gang_scheduler_name)
                _restart_paths(defaulted, config)
                if gang_scheduler_name:
                    click.echo(f"  gang: {gang.said(defaulted, config)}")
    if failed:
        sys.exit(1)


def _restart_paths(job: Defaulted, config: EngineConfig) -> None:
    """How the job's replica types restart when the whole job does (engine/supervised.py)."""
    if not resolve(job).whole_job_restarts:
        return
    for rtype, path in supervised.paths(job, framework_of(job), config).items():
        click.echo(f"  {rtype} restarts with the job: {path.how}; {path.why}")


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
        where = "stdin" if file == "-" else file
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
@click.option("--restart-in-place", is_flag=True,
              help="As the manager's flag: a job that restarts as a whole (restartScope Job) "
                   "and leaves runPolicy.restartInPlace unset has its processes stopped and "
                   "started again where they are.")
def run(file: str | None, replicas: tuple[str, ...], env: tuple[str, ...],
        workdir: Path | None, timeout: float | None, dry_run: bool, live: bool | None,
        restart_in_place: bool) -> None:
    """Run a job's replicas as processes on this machine, through the same engine as the
    cluster. FILE is a job manifest ('-' for stdin); without it, the built-in PyTorch DDP
    example runs. Exit status: 0 Succeeded, 1 Failed, 2 bad input, 3 suspended,
    124 timed out, 130 interrupted."""
    from trainop.local.cli import run_job

    try:
        doc, where = _read_one_job(file)
    except ManifestError as err:
        _fail(str(err))
    overrides = _pairs(replicas, "--replicas")
    code = run_job(doc, where, overrides, _pairs(env, "--env"), workdir, timeout, dry_run, live,
                   restart_in_place)
    sys.exit(code)


@main.command()
@click.argument("job", metavar="KIND/NAME")
@click.option("-n", "--namespace", help="The job's namespace [default: the kubeconfig "
                                        "context's, else default].")
@_KUBECONFIG
@click.option("-w", "--watch", is_flag=True, help="Keep the screen current until Ctrl-C.")
def describe(job: str, namespace: str | None, kubeconfig: str | None, watch: bool) -> None:
    """Show a job in a cluster as `trainop run` shows a local one: each replica's pod
    (phase, node, restarts, exit code, what it waits for), the job's conditions, the
    replicas it says wait, and its last failure. KIND/NAME as kubectl takes it, e.g.
    pytorchjob/mnist. Exit status: 0 shown, 1 the cluster could not be asked, 2 bad input
    or no such job."""
    import asyncio

    from rich.console import Console

    from trainop.cluster.reading import describe as screen
    from trainop.cluster.reading.client import REQUEST_ERRORS, APIError
    from trainop.cluster.reading.config import ConfigError, load

    word, _, name = job.partition("/")
    kind = screen.kind_of(word)
    if kind is None or not name:
        _fail(f"describe {job}: give KIND/NAME, KIND one of "
              f"{', '.join(k.lower() for k in KINDS)}")
    try:
        config = load(kubeconfig)
    except ConfigError as err:
        _fail(f"describe: {err}", 1)
    ns = namespace or config.namespace
    try:
        asyncio.run(screen.describe(config, kind, ns, name, Console(), watch))
    except KeyboardInterrupt:
        pass
    except APIError as err:
        if err.not_found:
            _fail(f"describe: {kind} {ns}/{name} not found")
        _fail(f"describe: {err}", 1)
    except REQUEST_ERRORS as err:
        _fail(f"describe: cannot reach the cluster: {err}", 1)


@main.command()
@click.option("--enable-scheme", "schemes", multiple=True, metavar="KIND",
              help="Run the controller of this kind (tfjob, pytorchjob, mpijob, xgboostjob, "
                   "paddlejob, jaxjob, mxjob); repeat for more [default: all].")
@click.option("--kueue-workloads", "queued", multiple=True, metavar="KIND",
              help="Queue jobs of this kind with Kueue by keeping their Workloads (list it "
                   "in Kueue's integrations.externalFrameworks as KIND.v1.kubeflow.org, and "
                   "not among its built-in frameworks); repeat for more, or 'all': every "
                   "kind but mpijob, which Kueue's kubeflow.org/mpijob integration (on in "
                   "its default configuration) queues at both versions [default: none: "
                   "Kueue's built-in integrations do it]. Not in upstream.")
@manager_flags.options
@click.option("--pytorch-init-container-template-file", type=click.Path(path_type=Path),
              default=Path("/etc/config/initContainer.yaml"), show_default=True,
              help="A YAML list of init containers to use instead, where the file exists; "
                   "{{.MasterAddr}}, {{.InitContainerImage}} and {{.MaxTries}} are filled in.")
@_KUBECONFIG
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
def manager(schemes: tuple[str, ...], queued: tuple[str, ...],
            pytorch_init_container_template_file: Path, kubeconfig: str | None,
            log_level: str, **flags: Any) -> None:
    """Run the controller manager against a cluster: one process, one shared cache, one
    controller per enabled job kind."""
    import asyncio

    from trainop.cluster.manager import StartupError, configure_logging, run_manager

    kinds = _kinds("--enable-scheme", schemes)
    queued_kinds = queued_kinds_of(queued)
    if flags["renew_deadline"] >= flags["lease_duration"]:
        _fail("--renew-deadline must be shorter than --lease-duration")
    template = _init_template(pytorch_init_container_template_file)
    configure_logging(log_level)
    opts = manager_flags.manager_options(
        flags, kinds=kinds or list(KINDS), kueue_kinds=queued_kinds, kubeconfig=kubeconfig,
        engine__pytorch_init_template=template,
        # upstream reads the cluster domain of TF_CONFIG's names from its own environment
        cluster_domain=os.environ.get("CUSTOM_CLUSTER_DOMAIN") or None)
    try:
        code = asyncio.run(run_manager(opts))
    except StartupError as err:
        _fail(str(err), 1)
    except OSError as err:  # e.g. a bind address in use
        _fail(f"manager: {err}", 1)
    sys.exit(code)


def _kinds(flag: str, names: tuple[str, ...]) -> list[str]:
    """The kinds `names` stand for (any case), each once; a name of none is fatal."""
    by_name = {k.lower(): k for k in KINDS}
    kinds: list[str] = []
    for name in names:
        if name.lower() not in by_name:
            _fail(f"{flag} {name}: unknown; choose from {', '.join(by_name)}")
        if by_name[name.lower()] not in kinds:
            kinds.append(by_name[name.lower()])
    return kinds


def queued_kinds_of(names: tuple[str, ...]) -> list[str]:
    """The kinds --kueue-workloads names: `all` is every kind but those served at a
    version whose operator Kueue integrates itself (MPIJob: `kubeflow.org/mpijob` keeps
    its Workloads at both versions); naming mpijob takes it too, for a Kueue with that
    integration off."""
    if [n.lower() for n in names] == ["all"]:
        return [k for k in KINDS if not any(
            v in PERSONAS and PERSONAS[v].kueue_integration for v in OTHER_VERSIONS.get(k, {}))]
    return _kinds("--kueue-workloads", names)


def _init_template(path: Path) -> str | None:
    """The text of the PyTorch init container template, where the file exists (as upstream:
    a missing file means the built-in one); one that cannot render stops the manager."""
    from trainop.frameworks.common import render_init_containers

    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as err:
        _fail(f"--pytorch-init-container-template-file {path}: {err.strerror}")
    try:
        render_init_containers(text, "image", 1, "master")
    except (ValueError, yaml.YAMLError) as err:
        _fail(f"--pytorch-init-container-template-file {path}: {str(err).splitlines()[0]}")
    return text


if __name__ == "__main__":
    main()
