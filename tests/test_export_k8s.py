"""Issue 20 section 2: ``agentd export k8s``: the manifests, their offline validation, and the pod run here.

No cluster is reachable here.  The manifests are checked against the API
models of the ``kubernetes`` client (generated from the Kubernetes OpenAPI
spec) and the agent-sandbox CRD schema vendored in supervisor/k8s/schemas/;
each check is shown to fail on a real violation.  Then a module's pod is run
on this machine as the kubelet would run it: each container's command with its
rendered environment (the Secret's value filled in), the volume a folder, the
remote a bare repository, the probes and the ``preStop`` hook as commands.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.config.environment import MEMORY_SYNC_ENV, agent_environment
from supervisor.config.settings import load_settings
from supervisor.config.stopbudget import stop_budget, timeout_stop_sec
from supervisor.config.units import load_units
from supervisor.k8s import manifests as m
from supervisor.k8s.validate import check_all, problems, sandbox_api_version
from supervisor.k8s.yamltext import dump_all
from tests.conftest import TASK, Project, alive, clean_env, git, processes_of, wait_until

SECRET_VALUE = "sk-test-0123456789abcdefghij"


def options(**changes: Any) -> m.Options:
    base = m.Options(image="registry.example/agentd:1", repo="https://git.example/team/app.git", branch="main",
                     name="agentd-app")
    return dataclasses.replace(base, **changes)


def rendered(project: Project, **changes: Any) -> tuple[list[m.ModulePlan], list[dict[str, Any]], m.Options]:
    specs, errors = load_units(project.root / "units")
    assert not errors, errors
    opts = options(**changes)
    plans = m.plan(specs, opts, project.root)
    return plans, m.render(plans, opts), opts


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def pod_of(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["podTemplate"]["spec"] if obj["kind"] == "Sandbox" else obj["spec"]["template"]["spec"]


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in [*pod.get("initContainers", []), *pod["containers"]] if c["name"] == name)


def env_of(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


# -- the YAML text -----------------------------------------------------------------------------------

def test_the_yaml_reads_back_as_the_objects(project: Project) -> None:
    project.fake_unit("web", cycle=True)
    plans, objects, opts = rendered(project)
    text = dump_all(objects, m.header(plans, opts))
    assert list(yaml.safe_load_all(text)) == objects
    script = container(pod_of(objects[-1]), "checkout")["command"][2]
    assert "        - |\n          set -eu\n" in text  # the shell scripts stay readable (a literal block)
    assert script == m.CHECKOUT_SCRIPT


_keys = st.text(max_size=12)
_scalars = st.one_of(st.text(max_size=40), st.integers(-2**40, 2**40), st.booleans(), st.none(),
                     st.sampled_from(["yes", "No", "on", "null", "~", "10Gi", "0x1F", "1e3", "-", "a: b", "#x",
                                      "|", "a\n b", " lead", "trail \n", "\n\nx", "\t", "\u2028", "\x85", "\ufeff",
                                      "---", "...", "x\n---\ny", "é\n", "\U0001f600"]))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                           st.dictionaries(_keys, inner, max_size=4)), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=5))
def test_any_strings_and_structures_read_back_exactly(data: dict[str, Any]) -> None:
    docs = list(yaml.safe_load_all(dump_all([data], ["a comment", "x: y"])))
    assert docs == [data]


# -- what the manifests say ----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", list(m.WorkloadKind))
def test_a_module_becomes_one_pod_with_probes_prestop_grace_and_sync(project: Project, kind: m.WorkloadKind) -> None:
    project.fake_unit("web", cycle=True, checkpoint="deadline = 100", stop_timeout=4)
    plans, objects, opts = rendered(project, kind=kind, namespace="agents")
    [claim] = by_kind(objects, "PersistentVolumeClaim")
    [work] = by_kind(objects, "Sandbox" if kind is m.WorkloadKind.SANDBOX else "StatefulSet")
    assert len(objects) == 2 and all(o["metadata"]["namespace"] == "agents" for o in objects)
    if kind is m.WorkloadKind.SANDBOX:
        assert work["apiVersion"] == "agents.x-k8s.io/v1beta1" == sandbox_api_version()
        assert work["spec"]["operatingMode"] == "Running"
    else:
        assert work["apiVersion"] == "apps/v1" and work["spec"]["replicas"] == 1
        assert work["spec"]["selector"]["matchLabels"].items() <= work["spec"]["template"]["metadata"]["labels"].items()
    pod = pod_of(work)
    # the claim holds the clone: mounted at /agentd in every container, the project at /agentd/project
    assert pod["volumes"][0] == {"name": "work", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    agentd = container(pod, "agentd")
    assert agentd["command"] == ["agentd", "start", "--foreground"] and agentd["workingDir"] == "/agentd/project"
    assert agentd["livenessProbe"]["exec"]["command"] == ["agentd", "status"]
    assert agentd["readinessProbe"]["exec"]["command"] == ["agentd", "status", "web"]
    assert agentd["lifecycle"]["preStop"]["exec"]["command"] == ["agentd", "stop"]
    # grace: the stop budget (deadline 100 + grace 2 + stop_timeout 4 + 15 for agentd) + the final sync
    budget = timeout_stop_sec(stop_budget({"web": load_units(project.root / "units")[0]["web"]}, 10.0))
    assert budget == 121 and pod["terminationGracePeriodSeconds"] == 121 + m.FINAL_SYNC_SECONDS
    env = env_of(agentd)
    assert env["AGENTD_ONLY_UNITS"] == '["web"]' and env["AGENTD_SERVICE_STOP_TIMEOUT"] == "121"
    assert env["AGENTD_SYNC"] == "after-decision" and env["AGENTD_SYNC_REMOTE"] == "origin"
    assert env["AGENTD_SYNC_BRANCH"] == "agentd-memory" and env["HOME"] == "/agentd/home"
    sidecar = container(pod, "memory-sync")
    assert sidecar["restartPolicy"] == "Always" and env_of(sidecar)["AGENTD_SYNC_EVERY"] == "300"
    assert [c["name"] for c in pod["initContainers"]] == ["checkout", "memory-sync"]
    assert env_of(container(pod, "checkout"))["PROJECT_REPO"] == opts.repo
    assert pod["automountServiceAccountToken"] is False
    assert check_all(objects) == []


def test_secrets_come_from_the_secret_and_are_never_written(project: Project) -> None:
    project.fake_unit("web", agent=f'env = {{ OPENAI_API_KEY = "{SECRET_VALUE}", LOG_LEVEL = "debug" }}')
    project.fake_unit("api", agent='env = { GITHUB_TOKEN = "" }', scope='module = "api"')
    plans, objects, opts = rendered(project, secret_env=("ANTHROPIC_API_KEY",))
    text = dump_all(objects, m.header(plans, opts))
    assert SECRET_VALUE not in text and "debug" not in text
    web = env_of(container(pod_of(by_kind(objects, "Sandbox")[1]), "agentd"))
    ref = {"secretKeyRef": {"name": "agentd-app", "key": "OPENAI_API_KEY"}}
    assert web["OPENAI_API_KEY"] == ref and "LOG_LEVEL" not in web
    assert web["ANTHROPIC_API_KEY"] == {"secretKeyRef": {"name": "agentd-app", "key": "ANTHROPIC_API_KEY"}}
    api = env_of(container(pod_of(by_kind(objects, "Sandbox")[0]), "agentd"))
    assert "OPENAI_API_KEY" not in api and api["GITHUB_TOKEN"]["secretKeyRef"]["key"] == "GITHUB_TOKEN"
    # a value in the unit file would win over the Secret's in the pod: both files are named, even the empty one
    warnings = [w for p in plans for w in p.warnings]
    assert any("web.toml sets OPENAI_API_KEY" in w and "--secret-env OPENAI_API_KEY" in w for w in warnings)
    assert any("api.toml sets GITHUB_TOKEN" in w for w in warnings)
    keys = ("ANTHROPIC_API_KEY", "GITHUB_TOKEN", "OPENAI_API_KEY")
    assert " ".join(f"--from-literal={k}=..." for k in keys) in text


def test_units_of_one_module_share_a_pod_and_their_stop_chain_adds_up(project: Project) -> None:
    project.fake_unit("db", cycle=True, scope='module = "core"', checkpoint="deadline = 50")
    project.fake_unit("web", cycle=True, scope='module = "core"', unit='after = ["db"]', checkpoint="deadline = 70")
    project.fake_unit("docs", cycle=True, unit='requires = ["web"]')
    plans, objects, _ = rendered(project)
    assert [(p.module, p.units) for p in plans] == [("core", ("db", "web")), ("docs", ("docs",))]
    core = env_of(container(pod_of(by_kind(objects, "Sandbox")[0]), "agentd"))
    assert json.loads(core["AGENTD_ONLY_UNITS"]) == ["db", "web"]
    # web stops before db: (70 + 2 + 3) + (50 + 2 + 3) + 15
    assert plans[0].grace_seconds == 145 + m.FINAL_SYNC_SECONDS
    assert any("unit docs comes after web (module 'core', another pod)" in w for w in plans[1].warnings)
    assert check_all(objects) == []


def test_names_are_dns_labels_and_distinct(project: Project) -> None:
    project.fake_unit("a", scope='module = "Big_Module.one"')
    project.fake_unit("b", scope='module = "big-module-one"')
    plans, objects, _ = rendered(project, name="agentd-" + "x" * 43)
    names = [o["metadata"]["name"] for o in objects]
    assert len(set(names)) == 4 and all(len(n) <= 63 and m.dns_name(n, 63) == n for n in names)
    assert all(len(p.name) <= m.NAME_LIMIT for p in plans)
    labels = by_kind(objects, "Sandbox")[0]["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "Big_Module.one"  # a valid label value stays as it is
    assert check_all(objects) == []
    with pytest.raises(m.ExportError, match="--storage"):
        m.plan({}, options(storage="ten gigs"), project.root)
    with pytest.raises(m.ExportError, match="--name"):
        m.plan({}, options(name="agentd-" + "x" * 60), project.root)
    with pytest.raises(m.ExportError, match="--namespace"):
        m.plan({}, options(namespace="Agents"), project.root)


# -- offline validation fails on real violations -------------------------------------------------------

def _broken(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    keys = path.split(".")
    node: Any = obj
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is KeyError:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return obj


@pytest.fixture
def objects(project: Project) -> dict[str, dict[str, Any]]:
    project.fake_unit("web", cycle=True)
    _, sandbox, _ = rendered(project)
    _, statefulset, _ = rendered(project, kind=m.WorkloadKind.STATEFULSET)
    found = {o["kind"]: o for o in [*sandbox, *statefulset]}
    assert check_all(found.values()) == []
    return found


@pytest.mark.parametrize(("kind", "path", "value", "expected"), [
    ("StatefulSet", "spec.template.spec.terminationGracePeriodSeconds", "400",
     "spec.template.spec.terminationGracePeriodSeconds: Input should be a valid integer"),
    ("StatefulSet", "spec.template.spec.containers.0.livenesProbe", {}, "livenesProbe: Extra inputs are not permitted"),
    ("StatefulSet", "spec.template.spec.containers.0.lifecycle.preStop.exec.command", "agentd stop",
     "command: Input should be a valid list"),
    ("StatefulSet", "spec.selector", KeyError, "spec.selector: Field required"),
    ("PersistentVolumeClaim", "spec.accessModes", "ReadWriteOnce", "spec.accessModes: Input should be a valid list"),
    ("Sandbox", "spec.operatingMode", "Paused", "spec.operatingMode: 'Paused' is not one of ['Running', 'Suspended']"),
    ("Sandbox", "spec.replicas", 1, "Additional properties are not allowed ('replicas' was unexpected)"),
    ("Sandbox", "spec.podTemplate", KeyError, "'podTemplate' is a required property"),
    ("Sandbox", "spec.podTemplate.spec.containers.0.env.0.valueFrom", {"secretKeyRef": {"name": "s"}},
     "'key' is a required property"),
    ("Sandbox", "spec.podTemplate.spec.shareProcessNamespace", "yes", "'yes' is not of type 'boolean'"),
    ("Sandbox", "metadata.labels", ["a"], "metadata: labels: Input should be a valid dictionary"),
    ("Sandbox", "apiVersion", "agents.x-k8s.io/v1alpha1", "is not a kind this check knows"),
])
def test_each_check_fails_on_a_real_violation(objects: dict[str, dict[str, Any]], kind: str, path: str, value: Any,
                                              expected: str) -> None:
    found = problems(_broken(objects[kind], path, value))
    assert any(expected in line for line in found), found


# -- the CLI ---------------------------------------------------------------------------------------------

def test_cli_finds_the_repository_and_validates(project: Project, tmp_path: Path) -> None:
    project.unit("web", '[agent]\nkind = "codex"\ncommand = ["codex-not-on-this-machine"]\n'
                        '[codex]\nenv_key = "MY_KEY"\n')
    project.unit("off", '[unit]\nenabled = false\n[agent]\ncommand = ["x"]\n')
    no_repo = project.agentd("export", "k8s", "--image", "img", check=False)
    assert no_repo.returncode == 1 and "--repo URL" in no_repo.stderr
    git(project.root, "init", "-q", "-b", "trunk")
    git(project.root, "remote", "add", "origin", "git@git.example:team/app.git")
    out = project.agentd("export", "k8s", "--image", "img", "--validate", "--kind", "statefulset")
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert [d["kind"] for d in docs] == ["PersistentVolumeClaim", "StatefulSet"]  # the disabled unit is left out
    pod = docs[1]["spec"]["template"]["spec"]
    checkout = env_of(container(pod, "checkout"))
    assert checkout["PROJECT_REPO"] == "git@git.example:team/app.git" and checkout["PROJECT_BRANCH"] == "trunk"
    assert docs[1]["metadata"]["name"] == f"agentd-{project.root.name}-web"
    assert env_of(container(pod, "agentd"))["MY_KEY"]["secretKeyRef"]["key"] == "MY_KEY"
    assert out.stderr == ""
    named = project.agentd("export", "k8s", "off", "--image", "img", "--repo", "/srv/app.git", "--branch", "b")
    assert "looks like a path on this machine" in named.stderr and "agentd-" in named.stdout
    for args, message in ((["nope"], "no such unit file"), (["--storage", "lots"], "--storage 'lots'"),
                          (["--secret", "Bad_Name"], "--secret 'Bad_Name'")):
        bad = project.agentd("export", "k8s", "--image", "img", *args, check=False)
        assert bad.returncode == 1 and message in bad.stderr, bad.stderr


def test_agents_keep_the_memory_sync_knobs_but_not_agentd_settings(project: Project) -> None:
    project.fake_unit("web")
    spec = load_units(project.root / "units")[0]["web"]
    base = {"AGENTD_SYNC": "after-decision", "AGENTD_SYNC_REMOTE": "origin", "AGENTD_SYNC_BRANCH": "mem",
            "AGENTD_ONLY_UNITS": '["web"]', "AGENTD_STATE_DIR": "/x", "PATH": "/bin"}
    env = agent_environment(spec, load_settings(project_root=project.root), "s1", base)
    assert {k: env[k] for k in MEMORY_SYNC_ENV} == {k: base[k] for k in MEMORY_SYNC_ENV}
    assert "AGENTD_ONLY_UNITS" not in env and "AGENTD_STATE_DIR" not in env


# -- the pod, run on this machine ------------------------------------------------------------------------

@dataclass
class LocalPod:
    """One module's pod as the kubelet runs it: each container's own command and rendered environment.

    The volume is a folder (``options.mount``); ``secrets`` plays the Secret;
    ``agentd``, ``git`` and ``sh`` come from this machine's PATH, as from the image's.
    """

    spec: dict[str, Any]
    secrets: dict[str, str]
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def container(self, name: str) -> dict[str, Any]:
        return container(self.spec, name)

    def env(self, name: str, **extra: str) -> dict[str, str]:
        env = clean_env()
        for item in self.container(name)["env"]:
            if "value" in item:
                env[item["name"]] = item["value"]
            else:
                ref = item["valueFrom"]["secretKeyRef"]
                env[item["name"]] = self.secrets[ref["key"]]  # a missing key fails, as the kubelet refuses
        return {**env, **extra}

    def cwd(self, name: str) -> str:
        """The container's workingDir, else the volume (an image's own WORKDIR, say)."""
        return self.container(name).get("workingDir") or self.container(name)["volumeMounts"][0]["mountPath"]

    def run(self, name: str, argv: list[str] | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
        """``argv`` (default: the container's command) as ``kubectl exec`` would run it in that container."""
        Path(self.env(name)["HOME"]).mkdir(parents=True, exist_ok=True)
        return subprocess.run(argv or self.container(name)["command"], env=self.env(name, **extra),
                              cwd=self.cwd(name), capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)

    def start(self, name: str, **extra: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(self.container(name)["command"], env=self.env(name, **extra), cwd=self.cwd(name),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        self.started.append(proc)
        return proc

    def probe(self, which: str) -> int:
        return self.run("agentd", self.container("agentd")[which]["exec"]["command"]).returncode

    def end(self) -> None:
        for proc in self.started:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(30)
        self.started.clear()


def remote_file(bare: Path, branch: str, path: str) -> str:
    proc = subprocess.run(["git", "--git-dir", str(bare), "show", f"{branch}:{path}"], capture_output=True,
                          text=True, timeout=30)
    return proc.stdout if proc.returncode == 0 else ""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Path, Project, Path]]:
    """A bare remote holding a project with one fake-agent unit (module web), and the folder of a volume."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    seed = Project(tmp_path / "seed")
    # FAKE_TOKEN, the Secret's, is not in the unit file: --secret-env names it.  The remote is a local
    # directory here: the fenced agent's own `agentd decide` pushes to it.
    seed.fake_unit("web", cycle=True, writable=(str(bare),))
    seed.init_memory()
    git(seed.root, "init", "-q", "-b", "main")
    git(seed.root, "add", "units", ".agent", ".gitignore")
    git(seed.root, "commit", "-q", "-m", "seed")
    git(seed.root, "push", "-q", str(bare), "main")
    volume = tmp_path / "volume"
    volume.mkdir()
    yield bare, seed, volume
    for proc in processes_of(volume / "project"):
        proc.kill()


def local_pod(bare: Path, seed: Project, volume: Path, sync_every: int = 3600) -> LocalPod:
    specs, errors = load_units(seed.root / "units")
    assert not errors
    opts = options(repo=str(bare), mount=str(volume), secret_env=("FAKE_TOKEN",), sync_every=sync_every)
    [plan] = m.plan(specs, opts, seed.root)
    objects = m.render([plan], opts)
    assert check_all(objects) == []
    return LocalPod(pod_of(by_kind(objects, "Sandbox")[0]), {"FAKE_TOKEN": SECRET_VALUE})


def checked_out(pod: LocalPod, volume: Path) -> Project:
    """The checkout init container ran: the clone on the volume, as a test Project."""
    checkout = pod.run("checkout")
    assert checkout.returncode == 0, checkout.stderr
    return Project(volume / "project")


def test_the_pod_starts_syncs_and_every_stop_is_a_pushed_checkpoint(cluster: tuple[Path, Project, Path]) -> None:
    bare, seed, volume = cluster
    pod = local_pod(bare, seed, volume)
    try:
        clone = checked_out(pod, volume)
        assert (clone.root / "units" / "web.toml").is_file()
        assert TASK in remote_file(bare, "agentd-memory", ".agent/current-task.md")  # the checkout's first sync
        sidecar = pod.start("memory-sync")
        main = pod.start("agentd")
        wait_until(lambda: pod.probe("startupProbe") == 0, 60, what="the startup probe")
        wait_until(lambda: pod.probe("readinessProbe") == 0, 60, what="the unit to run (readiness)")
        assert pod.probe("livenessProbe") == 0
        wait_until(lambda: len(seed.inputs("web")) == 1, 60, what="the first wakeup")
        assert TASK in seed.inputs("web")[0][0]
        # the agent got the Secret's value and the sync knobs, not agentd's own settings
        [agent] = [p for p in processes_of(clone.root) if "supervisor.fakeagent" in " ".join(p.cmdline())]
        environ = agent.environ()
        assert environ["FAKE_TOKEN"] == SECRET_VALUE and environ["AGENTD_SYNC"] == "after-decision"
        assert "AGENTD_ONLY_UNITS" not in environ
        # kubectl exec … agentd status / decide: a decision leaves the pod at once
        assert "web" in pod.run("agentd", ["agentd", "status"]).stdout
        decided = pod.run("agentd", ["agentd", "decide", "pods sync after each decision", "--why",
                                     "because hosts share one memory, so each decision is pushed", "--global"])
        assert decided.returncode == 0 and "synced with origin/agentd-memory" in decided.stdout, decided.stderr
        assert "pods sync after each decision" in remote_file(bare, "agentd-memory", ".agent/decisions.log")
        # preStop: `agentd stop` checkpoints, the daemon exits, within the grace period
        stopped = pod.run("agentd", pod.container("agentd")["lifecycle"]["preStop"]["exec"]["command"])
        assert stopped.returncode == 0 and "agentd stopped" in stopped.stdout, stopped.stderr
        assert main.wait(pod.spec["terminationGracePeriodSeconds"]) == 0
        assert pod.probe("livenessProbe") == 3
        record = clone.history("web")[-1]
        assert record["flush"] == "verified", record
        # the checkpoint's decision was pushed by the agent's own `agentd decide` (AGENTD_SYNC passed through)
        module_log = (clone.root / ".agent" / "decisions-web.log").read_text().splitlines()[-1]
        assert module_log in remote_file(bare, "agentd-memory", ".agent/decisions-web.log")
        # the sidecar's last sync, on SIGTERM after the agentd container exited, pushes what is left
        assert pod.run("agentd", ["agentd", "note", "written after the stop", "--confirmed"]).returncode == 0
        assert "written after the stop" not in remote_file(bare, "agentd-memory", ".agent/engram.md")
        sidecar.send_signal(signal.SIGTERM)
        assert sidecar.wait(m.FINAL_SYNC_SECONDS) == 0
        assert "written after the stop" in remote_file(bare, "agentd-memory", ".agent/engram.md")
        assert processes_of(clone.root) == []
    finally:
        pod.end()


def test_a_dead_node_reschedules_on_the_same_volume_and_the_unit_wakes_up(cluster: tuple[Path, Project, Path]) -> None:
    bare, seed, volume = cluster
    pod = local_pod(bare, seed, volume)
    try:
        clone = checked_out(pod, volume)
        pod.start("agentd")
        wait_until(lambda: pod.probe("readinessProbe") == 0, 60, what="the unit to run")
        wait_until(lambda: len(seed.inputs("web")) == 1, 60, what="the first wakeup")
        (clone.root / "wip.txt").write_text("uncommitted work\n")
        daemon = clone.daemon_pid()
        doomed = [daemon, *(p.pid for p in processes_of(clone.root))]
        for pid in doomed:  # the node is gone: no preStop, no SIGTERM
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not any(alive(p) for p in doomed), 30, what="the pod's processes to die")
        assert pod.probe("livenessProbe") == 3
        pod.end()
        # the rescheduled pod: the claim is reattached, the checkout keeps the worktree as it was
        head = git(clone.root, "rev-parse", "HEAD")
        again = pod.run("checkout")
        assert again.returncode == 0, again.stderr
        assert (clone.root / "wip.txt").read_text() == "uncommitted work\n"
        assert git(clone.root, "rev-parse", "HEAD") == head
        assert "?? wip.txt" in git(clone.root, "status", "--porcelain")
        pod.start("agentd")
        wait_until(lambda: pod.probe("readinessProbe") == 0, 60, what="the unit to run again")
        wait_until(lambda: len(seed.inputs("web")) == 2, 60, what="the wakeup of the new pod's session")
        assert TASK in seed.inputs("web")[1][0]
        assert pod.run("agentd", ["agentd", "stop"]).returncode == 0
    finally:
        pod.end()


def test_the_sidecar_syncs_on_its_own_schedule(cluster: tuple[Path, Project, Path]) -> None:
    bare, seed, volume = cluster
    pod = local_pod(bare, seed, volume, sync_every=1)
    try:
        checked_out(pod, volume)
        sidecar = pod.start("memory-sync")
        assert pod.run("memory-sync", ["agentd", "note", "found by the periodic sync", "--confirmed"]).returncode == 0
        wait_until(lambda: "found by the periodic sync" in remote_file(bare, "agentd-memory", ".agent/engram.md"), 60,
                   what="the sidecar's periodic sync")
        assert sidecar.poll() is None
        sidecar.send_signal(signal.SIGTERM)
        assert sidecar.wait(m.FINAL_SYNC_SECONDS) == 0
        assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "1"]
                    and p.ppid() == sidecar.pid]
    finally:
        pod.end()
