"""``agentd export k8s``: a project's units as Kubernetes objects (pure functions, no cluster, no I/O).

One pod per **module** (the units that share a module's memory share a
worktree): an agent-sandbox ``Sandbox`` (``agents.x-k8s.io/v1beta1``, the
SIG Apps agent-sandbox CRD: a stateful singleton pod), or a ``StatefulSet``
of one replica for clusters without that CRD, and a ``PersistentVolumeClaim``
that holds the clone (worktree, ``.agent/``, ``.agentd/``) and ``HOME``.

The pod, in start order:

``checkout`` (init container)
    clones the repository onto the volume unless it is there already (a
    rescheduled pod finds its worktree as it was), then syncs the memory once
    so that the first wakeup carries what other hosts decided.
``memory-sync`` (a native sidecar: an init container with ``restartPolicy:
Always``, Kubernetes >= 1.29)
    ``agentd sync`` every ``sync_every`` seconds, and once more on SIGTERM,
    which a sidecar gets only after the agentd container has exited: the
    stop's checkpoint is pushed too.
``agentd``
    ``agentd start --foreground`` with ``AGENTD_ONLY_UNITS`` naming the
    module's units: the project's own daemon, at the default state directory,
    so that ``kubectl exec … agentd status|attach|logs`` need nothing more.
    Liveness: ``agentd status`` (the daemon answers); readiness: ``agentd
    status UNIT…`` (every unit runs); ``preStop``: ``agentd stop`` (every pod
    stop is a checkpoint); ``terminationGracePeriodSeconds``: the stop budget
    of :mod:`supervisor.config.stopbudget` plus the final sync.
    ``AGENTD_SYNC=after-decision`` makes each decision leave the pod at once.

Secrets: every secret-named variable of the units' ``[agent] env`` (the
redactor's rule, :func:`supervisor.session.redact.is_secret_env_name`), the
``[codex] env_key`` and the extra names given come from one Secret by
``secretKeyRef``; no value is ever written into a manifest.  The shell
scripts are constants: every value they use comes from the environment.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..config.stopbudget import StopBudget, stop_budget, timeout_stop_sec
from ..config.units import UnitSpec, start_order
from ..session.redact import is_secret_env_name

SANDBOX_API_VERSION = "agents.x-k8s.io/v1beta1"
#: Seconds for the sidecar's last ``agentd sync`` after the agentd container has stopped.
FINAL_SYNC_SECONDS = 60
#: Where the volume is mounted in every container; the clone is ``<mount>/project``, HOME ``<mount>/home``.
MOUNT = "/agentd"
VOLUME = "work"
#: The Secret key that holds a git credential-store file (``--git-credentials``).
GIT_CREDENTIALS_KEY = "git-credentials"
GIT_CREDENTIALS_DIR = "/var/run/agentd/git"
#: The clone's remote: the repository the pod cloned is the one its memory syncs through.
SYNC_REMOTE = "origin"
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?")
_QUANTITY = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[KMGTPE]i|[kMGTPE]|[eE][0-9]+)?")
#: Longest object name: a StatefulSet's pods and revisions add suffixes to 63-character labels.
NAME_LIMIT = 52

CHECKOUT_SCRIPT = """\
set -eu
mkdir -p "$HOME"
if [ ! -d "$AGENTD_PROJECT/.git" ]; then
  git clone --branch "$PROJECT_BRANCH" -- "$PROJECT_REPO" "$AGENTD_PROJECT"
fi
cd "$AGENTD_PROJECT"
agentd sync --remote "$AGENTD_SYNC_REMOTE" --branch "$AGENTD_SYNC_BRANCH" \\
  || echo "agentd: the memory was not synced at start; the memory-sync sidecar retries" >&2
"""

SYNC_SCRIPT = """\
cd "$AGENTD_PROJECT"
trap 'kill "$!" 2>/dev/null; agentd sync --remote "$AGENTD_SYNC_REMOTE" --branch "$AGENTD_SYNC_BRANCH"; exit 0' TERM
while :; do
  sleep "$AGENTD_SYNC_EVERY" & wait $!
  agentd sync --remote "$AGENTD_SYNC_REMOTE" --branch "$AGENTD_SYNC_BRANCH" || true
done
"""


class WorkloadKind(str, enum.Enum):
    """What runs a module's pod."""

    SANDBOX = "sandbox"
    STATEFULSET = "statefulset"


class ExportError(ValueError):
    """The units or options cannot be exported; the message says which and what to do."""


@dataclass(frozen=True)
class Options:
    """Everything the manifests depend on besides the units."""

    image: str
    repo: str
    branch: str
    name: str  # prefix of every object's name, e.g. agentd-myapp
    kind: WorkloadKind = WorkloadKind.SANDBOX
    namespace: str | None = None
    secret: str | None = None  # default: ``name``
    secret_env: tuple[str, ...] = ()
    storage: str = "10Gi"
    storage_class: str | None = None
    sync_branch: str = "agentd-memory"
    sync_every: int = 300
    git_credentials: str | None = None  # a Secret with a git-credentials file
    default_stop_timeout: float = 10.0  # the daemon's stop_timeout setting
    mount: str = MOUNT

    @property
    def secret_name(self) -> str:
        return self.secret or self.name


@dataclass(frozen=True)
class ModulePlan:
    """One module's pod: its units, names, stop budget, secrets, and what to warn about."""

    module: str
    units: tuple[str, ...]  # start order
    name: str  # the Sandbox / StatefulSet
    budget: StopBudget
    secret_env: tuple[str, ...]
    warnings: tuple[str, ...] = field(default=())

    @property
    def claim(self) -> str:
        return f"{self.name}-{VOLUME}"

    @property
    def grace_seconds(self) -> int:
        """``terminationGracePeriodSeconds``: agentd's whole stop, then the sidecar's last sync."""
        return timeout_stop_sec(self.budget) + FINAL_SYNC_SECONDS


def dns_name(text: str, limit: int = NAME_LIMIT) -> str:
    """``text`` as a DNS-1123 label of at most ``limit`` characters; a changed name gets a hash of the original."""
    clean = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")
    if clean == text and len(clean) <= limit:
        return clean
    digest = hashlib.sha256(text.encode()).hexdigest()[:6]
    return f"{clean[:limit - 7].rstrip('-')}-{digest}".lstrip("-")


def label_value(text: str) -> str:
    """``text`` as a label value (63 characters of ``[A-Za-z0-9_.-]``, alphanumeric at both ends)."""
    return text if _LABEL_VALUE.fullmatch(text) else dns_name(text, 63)


def check_options(options: Options) -> None:
    """Raise :class:`ExportError` for an option Kubernetes would refuse."""
    for what, value in (("--name", options.name), ("--secret", options.secret_name),
                        ("--namespace", options.namespace), ("--git-credentials", options.git_credentials)):
        if value is not None and dns_name(value, 63) != value:
            raise ExportError(f"{what} {value!r}: use lowercase letters, digits and '-' (at most 63 characters)")
    if not _QUANTITY.fullmatch(options.storage):
        raise ExportError(f"--storage {options.storage!r} is not a size such as 10Gi or 500Mi")
    for name in options.secret_env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ExportError(f"--secret-env {name!r} is not an environment variable name")
    if not options.image.strip():
        raise ExportError("--image is empty: name the image that has agentd, git, sh and the agents' CLIs")


def plan(specs: Mapping[str, UnitSpec], options: Options, project_root: Path) -> list[ModulePlan]:
    """The modules of ``specs``, each with what its pod needs (ordered by module name)."""
    check_options(options)
    by_module: dict[str, dict[str, UnitSpec]] = {}
    for name, spec in specs.items():
        by_module.setdefault(spec.module, {})[name] = spec
    plans = []
    names: dict[str, str] = {}
    for module in sorted(by_module):
        group = by_module[module]
        name = dns_name(f"{options.name}-{module}")
        if name in names:
            raise ExportError(f"modules {names[name]!r} and {module!r} would both be named {name!r}: rename one")
        names[name] = module
        secrets = sorted({*options.secret_env,
                          *(k for s in group.values() for k in s.agent.env if is_secret_env_name(k)),
                          *(s.codex.env_key for s in group.values() if s.codex.env_key)})
        plans.append(ModulePlan(module=module, units=tuple(start_order(group)), name=name,
                                budget=stop_budget(group, options.default_stop_timeout),
                                secret_env=tuple(secrets), warnings=_warnings(group, specs, project_root)))
    return plans


def _warnings(group: Mapping[str, UnitSpec], specs: Mapping[str, UnitSpec], root: Path) -> tuple[str, ...]:
    out = []
    for name, spec in sorted(group.items()):
        inline = sorted(k for k in spec.agent.env if is_secret_env_name(k))
        if inline:
            names = " ".join(f"--secret-env {k}" for k in inline)
            out.append(f"{spec.path.name} sets {', '.join(inline)} in [agent] env: a unit's value (even an empty "
                       "one) overrides the pod's environment, so the agent would not get the Secret's; delete it "
                       f"from the unit file and export with {names}")
        for dep in sorted({*spec.unit.after, *spec.unit.requires}):
            if dep not in group:
                where = f"module {specs[dep].module!r}, another pod" if dep in specs else "not exported"
                out.append(f"unit {name} comes after {dep} ({where}): Kubernetes does not order pods, and its "
                           "daemon treats a requirement it does not run as managed elsewhere")
        workdir = spec.workdir_path(root).resolve()
        if not workdir.is_relative_to(root.resolve()):
            out.append(f"unit {name}: workdir {spec.agent.workdir} is outside the project, so not on the pod's volume")
    return tuple(out)


# -- the objects ------------------------------------------------------------------------------------

def labels(options: Options, plan: ModulePlan) -> dict[str, str]:
    return {"app.kubernetes.io/name": "agentd", "app.kubernetes.io/instance": plan.name,
            "app.kubernetes.io/component": label_value(plan.module),
            "app.kubernetes.io/part-of": label_value(options.name), "app.kubernetes.io/managed-by": "agentd"}


def _metadata(options: Options, plan: ModulePlan, name: str) -> dict[str, object]:
    meta: dict[str, object] = {"name": name}
    if options.namespace:
        meta["namespace"] = options.namespace
    meta["labels"] = labels(options, plan)
    return meta


def _env(pairs: Sequence[tuple[str, str]]) -> list[dict[str, object]]:
    return [{"name": k, "value": v} for k, v in pairs]


def _paths(options: Options) -> tuple[str, str]:
    mount = options.mount.rstrip("/") or "/"
    return f"{mount}/project", f"{mount}/home"


def _common_env(options: Options) -> list[tuple[str, str]]:
    project, home = _paths(options)
    pairs = [("AGENTD_PROJECT", project), ("HOME", home), ("AGENTD_SYNC_REMOTE", SYNC_REMOTE),
             ("AGENTD_SYNC_BRANCH", options.sync_branch)]
    if options.git_credentials:
        pairs += [("GIT_CONFIG_COUNT", "1"), ("GIT_CONFIG_KEY_0", "credential.helper"),
                  ("GIT_CONFIG_VALUE_0", f"store --file={GIT_CREDENTIALS_DIR}/{GIT_CREDENTIALS_KEY}")]
    return pairs


def _mounts(options: Options) -> list[dict[str, object]]:
    mounts: list[dict[str, object]] = [{"name": VOLUME, "mountPath": options.mount}]
    if options.git_credentials:
        mounts.append({"name": "git-credentials", "mountPath": GIT_CREDENTIALS_DIR, "readOnly": True})
    return mounts


def _exec(*argv: str) -> dict[str, object]:
    return {"exec": {"command": list(argv)}}


def agentd_container(options: Options, plan: ModulePlan) -> dict[str, object]:
    """The container that runs the module's units under ``agentd start --foreground``."""
    project, _ = _paths(options)
    env = _env([*_common_env(options), ("AGENTD_SYNC", "after-decision"),
                ("AGENTD_ONLY_UNITS", json.dumps(list(plan.units))),
                ("AGENTD_SERVICE_STOP_TIMEOUT", str(timeout_stop_sec(plan.budget)))])
    env += [{"name": k, "valueFrom": {"secretKeyRef": {"name": options.secret_name, "key": k}}}
            for k in plan.secret_env]
    status = ("agentd", "status")
    return {
        "name": "agentd",
        "image": options.image,
        "command": ["agentd", "start", "--foreground"],
        "workingDir": project,
        "env": env,
        "volumeMounts": _mounts(options),
        # Until the daemon answers (its units loaded): up to 5 minutes.
        "startupProbe": {**_exec(*status), "periodSeconds": 5, "timeoutSeconds": 10, "failureThreshold": 60},
        # The daemon answers; a checkpoint or a unit waiting for a usage limit is alive, not dead.
        "livenessProbe": {**_exec(*status), "periodSeconds": 30, "timeoutSeconds": 10, "failureThreshold": 3},
        # Every unit runs (not during a checkpoint or a restart): shown as READY, restarts nothing.
        "readinessProbe": {**_exec(*status, *plan.units), "periodSeconds": 15, "timeoutSeconds": 10},
        "lifecycle": {"preStop": _exec("agentd", "stop")},
    }


def pod_spec(options: Options, plan: ModulePlan) -> dict[str, object]:
    """The pod of one module (the same for a Sandbox and a StatefulSet)."""
    base = _env(_common_env(options))
    checkout = {"name": "checkout", "image": options.image, "command": ["sh", "-c", CHECKOUT_SCRIPT],
                "env": [*base, *_env([("PROJECT_REPO", options.repo), ("PROJECT_BRANCH", options.branch)])],
                "volumeMounts": _mounts(options)}
    sidecar = {"name": "memory-sync", "image": options.image, "restartPolicy": "Always",
               "command": ["sh", "-c", SYNC_SCRIPT],
               "env": [*base, *_env([("AGENTD_SYNC_EVERY", str(options.sync_every))])],
               "volumeMounts": _mounts(options)}
    volumes: list[dict[str, object]] = [{"name": VOLUME, "persistentVolumeClaim": {"claimName": plan.claim}}]
    if options.git_credentials:
        volumes.append({"name": "git-credentials", "secret": {
            "secretName": options.git_credentials, "defaultMode": 0o440,
            "items": [{"key": GIT_CREDENTIALS_KEY, "path": GIT_CREDENTIALS_KEY}]}})
    return {
        # The agents run whatever they decide to: no Kubernetes API token in their pod.
        "automountServiceAccountToken": False,
        # The pause container is PID 1 and reaps what escapes agentd; agentd runs as on a host.
        "shareProcessNamespace": True,
        "terminationGracePeriodSeconds": plan.grace_seconds,
        "initContainers": [checkout, sidecar],
        "containers": [agentd_container(options, plan)],
        "volumes": volumes,
    }


def claim(options: Options, plan: ModulePlan) -> dict[str, object]:
    spec: dict[str, object] = {"accessModes": ["ReadWriteOnce"],
                               "resources": {"requests": {"storage": options.storage}}}
    if options.storage_class:
        spec["storageClassName"] = options.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _metadata(options, plan, plan.claim),
            "spec": spec}


def workload(options: Options, plan: ModulePlan) -> dict[str, object]:
    """The module's Sandbox, or its StatefulSet of one replica."""
    template = {"metadata": {"labels": labels(options, plan)}, "spec": pod_spec(options, plan)}
    if options.kind is WorkloadKind.SANDBOX:
        return {"apiVersion": SANDBOX_API_VERSION, "kind": "Sandbox", "metadata": _metadata(options, plan, plan.name),
                "spec": {"operatingMode": "Running", "podTemplate": template}}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": _metadata(options, plan, plan.name),
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app.kubernetes.io/instance": plan.name}},
                     "template": template}}


def render(plans: Sequence[ModulePlan], options: Options) -> list[dict[str, object]]:
    """Every object, claims first (a pod waits for its claim)."""
    return [*(claim(options, p) for p in plans), *(workload(options, p) for p in plans)]


def pod_name(options: Options, plan: ModulePlan) -> str:
    return plan.name if options.kind is WorkloadKind.SANDBOX else f"{plan.name}-0"


def header(plans: Sequence[ModulePlan], options: Options) -> list[str]:
    """The comment lines above the manifests: what to create first, how to reach the pods, warnings."""
    ns = f" -n {options.namespace}" if options.namespace else ""
    kind = ("one agent-sandbox Sandbox per module (agents.x-k8s.io/v1beta1: agent-sandbox >= v0.5)"
            if options.kind is WorkloadKind.SANDBOX else "one StatefulSet of one replica per module")
    keys = sorted({k for p in plans for k in p.secret_env})
    lines = [f"agentd export k8s: {kind}, each with its PersistentVolumeClaim (the clone and HOME).",
             "Native sidecars (an init container with restartPolicy: Always) need Kubernetes >= 1.29.",
             f"The pods clone {options.repo} ({options.branch}) and sync the memory through it "
             f"({options.sync_branch}; every {options.sync_every} s, after each decision, at each stop)."]
    if keys:
        lines += ["First create the Secret the agents' keys come from (never written here):",
                  f"  kubectl{ns} create secret generic {options.secret_name} "
                  + " ".join(f"--from-literal={k}=..." for k in keys)]
    if options.git_credentials:
        lines += [f"  kubectl{ns} create secret generic {options.git_credentials} "
                  f"--from-file={GIT_CREDENTIALS_KEY}=$HOME/.git-credentials"]
    lines.append(f"Then: kubectl{ns} apply -f THIS_FILE")
    for p in plans:
        pod = pod_name(options, p)
        lines.append(f"module {p.module}: units {', '.join(p.units)}; pod {pod}; grace {p.grace_seconds} s "
                     f"(stop {timeout_stop_sec(p.budget)} s + final sync {FINAL_SYNC_SECONDS} s)")
        lines.append(f"  kubectl{ns} exec -it {pod} -c agentd -- agentd attach {p.units[0]}")
        lines.append(f"  stop (a checkpoint; the volume stays): kubectl{ns} {stop_hint(options, p)}")
        lines += [f"  warning: {w}" for w in p.warnings]
    return lines


def stop_hint(options: Options, plan: ModulePlan) -> str:
    """How to stop a module's pod for a while (a checkpoint, the volume kept)."""
    if options.kind is WorkloadKind.SANDBOX:
        return f"patch sandbox {plan.name} --type merge -p '{{\"spec\":{{\"operatingMode\":\"Suspended\"}}}}'"
    return f"scale statefulset {plan.name} --replicas=0"

