"""``agentd export k8s [UNIT...]``: a project's units as Kubernetes manifests (see docs/fleet.md).

The objects come from :mod:`supervisor.k8s.manifests` (pure); this command
finds the units (what ``agentd start`` would run), the repository the pods
clone (the ``origin`` remote and the current branch, unless given), prints
the YAML, and with ``--validate`` checks it offline first.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from .context import AppContext, pass_app


def _origin_and_branch(root: Path) -> tuple[str | None, str | None]:
    """The origin remote's URL and the current branch, read with libgit2 (no git process runs what the
    repository's config names)."""
    from ..memory.gitrepo import GitError, RepoError, open_repo

    try:
        found = open_repo(root)
    except RepoError:
        return None, None
    if found is None:
        return None, None
    try:
        url = found.git.remotes["origin"].url or None
    except (KeyError, GitError, ValueError):
        url = None
    try:
        branch = None if found.git.head_is_detached else found.git.references["HEAD"].target.removeprefix("refs/heads/")
    except (KeyError, GitError, ValueError, AttributeError):
        branch = None
    return url, branch or None


def _local_path(url: str) -> bool:
    """A URL that only this machine can reach (a path or file://), not a pod."""
    remote = r"[A-Za-z][A-Za-z0-9+.-]*://|[^/:@]+@[^/:]+:|[A-Za-z0-9.-]+:"  # scheme://, user@host:, host:
    return url.startswith(("/", ".", "file:")) or not re.match(remote, url)


@click.command("k8s", epilog="""\b
Examples:
  agentd export k8s --image registry.example/agentd:1 > agentd.yaml
  agentd export k8s web --image IMG --kind statefulset --namespace agents
  agentd export k8s --image IMG --secret-env OPENAI_API_KEY --validate | kubectl apply -f -""")
@click.argument("units", nargs=-1)
@click.option("--image", required=True, help="the container image: agentd, git, sh and the agents' CLIs on PATH")
@click.option("--kind", type=click.Choice(["sandbox", "statefulset"]), default="sandbox",
              show_default=True, help="agent-sandbox Sandbox, or a StatefulSet of one replica (no CRD needed)")
@click.option("--repo", help="git URL the pods clone and sync the memory through (default: the origin remote's URL)")
@click.option("--branch", help="branch the pods check out (default: the current branch)")
@click.option("--name", help="prefix of the objects' names (default: agentd-<project folder>)")
@click.option("--namespace", help="metadata.namespace of every object")
@click.option("--secret", help="the Secret the agents' keys come from (default: the --name prefix)")
@click.option("--secret-env", multiple=True, metavar="VAR",
              help="one more variable from the Secret (repeat), e.g. OPENAI_API_KEY when no unit file names it")
@click.option("--storage", default="10Gi", show_default=True, help="size of each module's volume")
@click.option("--storage-class", help="storageClassName of the volumes (default: the cluster's)")
@click.option("--sync-branch", default="agentd-memory", show_default=True, help="the memory's branch on the remote")
@click.option("--sync-every", type=click.IntRange(min=10), default=300, show_default=True,
              help="seconds between the sidecar's memory syncs")
@click.option("--git-credentials", metavar="SECRET",
              help="a Secret whose key git-credentials is a git credential-store file, for clone and push")
@click.option("--validate", is_flag=True, help="check the manifests offline first (needs the k8s extra)")
@pass_app
def export_k8s(app: AppContext, units: tuple[str, ...], image: str, kind: str, repo: str | None,
               branch: str | None, name: str | None, namespace: str | None, secret: str | None,
               secret_env: tuple[str, ...], storage: str, storage_class: str | None, sync_branch: str,
               sync_every: int, git_credentials: str | None, validate: bool) -> None:
    """Print Kubernetes manifests that run the project's units, one pod per module.

    Per module: a Sandbox (agents.x-k8s.io/v1beta1) or a StatefulSet of one
    replica, and a PersistentVolumeClaim for the clone.  The pod clones the
    repository, runs `agentd start --foreground` for the module's units
    (liveness: `agentd status`; preStop: `agentd stop`, a checkpoint), syncs
    the memory through the remote, and takes the agents' keys from a Secret.
    Default UNITS: every enabled unit.  See docs/fleet.md.
    """
    from ..config.check import load_project_units
    from ..k8s.manifests import ExportError, Options, WorkloadKind, dns_name, header, plan, render
    from ..k8s.yamltext import dump_all

    settings = app.settings
    root = settings.project_root
    only = set(units) or None
    specs, errors = load_project_units(settings.units_path, root, only, commands=False)  # the image's programs
    if errors:
        raise click.ClickException("refused: " + "; ".join(str(e) for e in errors))
    if not units:
        specs = {n: s for n, s in specs.items() if s.unit.enabled}
    if not specs:
        raise click.ClickException(f"no enabled unit in {settings.units_path}: name the units to export")
    origin, current = _origin_and_branch(root) if not (repo and branch) else (None, None)
    repo = repo or origin
    if not repo:
        raise click.ClickException("the pods clone the project: give --repo URL (this project has no origin remote)")
    branch = branch or current
    if not branch:
        raise click.ClickException("give --branch: the project has no current branch to check out")
    if _local_path(repo):
        click.echo(f"warning: {repo} looks like a path on this machine; a pod cannot reach it (give --repo URL)",
                   err=True)
    options = Options(image=image, repo=repo, branch=branch, name=name or dns_name(f"agentd-{root.name}"),
                      kind=WorkloadKind(kind), namespace=namespace, secret=secret, secret_env=secret_env,
                      storage=storage, storage_class=storage_class, sync_branch=sync_branch, sync_every=sync_every,
                      git_credentials=git_credentials, default_stop_timeout=settings.stop_timeout)
    try:
        plans = plan(specs, options, root)
    except ExportError as exc:
        raise click.ClickException(str(exc)) from None
    objects = render(plans, options)
    if validate:
        from ..k8s.validate import ValidatorMissing, check_all

        try:
            found = check_all(objects)
        except ValidatorMissing as exc:
            raise click.ClickException(str(exc)) from None
        if found:
            raise click.ClickException("the manifests do not validate:\n  " + "\n  ".join(found))
    for p in plans:
        for warning in p.warnings:
            click.echo(f"warning: module {p.module}: {warning}", err=True)
    click.echo(dump_all(objects, header(plans, options)), nl=False)
