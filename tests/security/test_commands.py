"""Never run a command an agent can configure: agentd refuses a configured command whose script an agent may
write (issue 25), with the real daemon and a fenced agent.

``[wakeup] command = ["bash", "etc/wakeup.sh"]`` runs whatever etc/wakeup.sh holds, unfenced, as the daemon.
Before the fix a unit whose scope covered etc/ edited the script from inside its fence, and the next wakeup
of another unit ran it.  Now ``agentd check`` and ``start`` refuse such a unit, naming the script and the unit
that may write it; the same for a ``[notify]`` command (the settings' or a plan's), and for an ``[agent]
command`` that runs another unit's files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from supervisor.config.runnable import command_problem, runs
from tests.conftest import Project, wait_until
from tests.security.test_agent_memory import shell

WAKEUP = '#!/bin/sh\necho "the person wakeup"\n'


def _project(project: Project, scope_a: str) -> Path:
    root = project.root
    (root / "etc").mkdir()
    (root / "etc" / "wakeup.sh").write_text(WAKEUP)
    (root / "src").mkdir()
    project.agentd("init")
    project.fake_unit("a", scope=f"paths = {scope_a}")
    project.fake_unit("b", scope='paths = ["src/**"]', wakeup='command = ["sh", "etc/wakeup.sh"]')
    return root


def test_a_wakeup_script_an_agent_may_write_is_refused_and_never_run(project: Project) -> None:
    root = _project(project, '["etc/**"]')
    marker = root.parent / "ran-outside-the-fence"
    checked = project.agentd("check", check=False)
    assert checked.returncode == 1
    assert ("error  " in checked.stdout and "b.toml: [wakeup] command runs etc/wakeup.sh, which the agent of unit "
            "'a' may write: agentd never runs a command an agent can change") in checked.stdout, checked.stdout
    started = project.agentd("start", check=False)
    assert started.returncode == 1 and "b.toml: [wakeup] command runs etc/wakeup.sh" in started.stdout + started.stderr
    project.wait_state("a", "running")
    assert project.unit_status("b") is None  # refused: not loaded, so never started nor woken
    said = shell(project, "a", f"printf '#!/bin/sh\\ntouch {marker}\\n' > etc/wakeup.sh && echo edited")
    assert "edited" in said  # the agent can edit the script (its scope) ...
    assert project.agentd("start", "b", check=False).returncode == 1
    printed = project.agentd("wakeup", "b", check=False)  # ... and nothing of agentd runs it
    assert printed.returncode == 1 and "which the agent of unit 'a' may write" in printed.stderr
    assert not marker.exists()


def test_the_same_script_outside_every_scope_runs(project: Project) -> None:
    _project(project, '["docs/**"]')
    assert "ok     b:" in project.agentd("check").stdout
    assert project.agentd("wakeup", "b").stdout == "the person wakeup\n"


def test_notify_commands_that_run_an_agents_file_are_refused(project: Project) -> None:
    root = _project(project, '["etc/**"]')
    (root / "units" / "b.toml").write_text((root / "units" / "b.toml").read_text().replace(
        'command = ["sh", "etc/wakeup.sh"]', ""))
    (root / "etc" / "notify.sh").write_text("#!/bin/sh\ncat > /dev/null\n")
    (root / "etc" / "agentd.toml").write_text('[notify]\ncommand = ["sh", "etc/notify.sh"]\n')
    (root / "plans").mkdir()
    (root / "plans" / "night.toml").write_text(
        '[plan]\ndeadline = "8h"\ntokens = 1_000_000\n\n[notify]\ncommand = ["sh", "etc/notify.sh"]\n\n'
        '[[task]]\nid = "t1"\nunit = "b"\nask = "x"\ndone_when = ["true"]\n')
    checked = project.agentd("check", check=False)
    assert checked.returncode == 1
    lines = [ln for ln in checked.stdout.splitlines() if "notify.sh" in ln]
    assert any(ln.startswith("error  settings: [notify] command runs etc/notify.sh") for ln in lines), checked.stdout
    assert any("plans/night.toml:6: [notify] command runs etc/notify.sh" in ln for ln in lines), checked.stdout
    project.agentd("start")
    project.wait_state("a", "running")
    refused = wait_until(lambda: project.events("notify_refused"), 30, what="the daemon to refuse the notify command")
    assert "which the agent of unit 'a' may write" in refused[0]["error"]


def test_what_a_command_runs(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "w.sh").write_text("echo\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "mod.py").write_text("")
    got = runs(["bash", "-c", "sh etc/w.sh && echo ok"], tmp_path)
    assert tmp_path / "etc" / "w.sh" in got
    for string in ("echo hi; . etc/w.sh", "source etc/w.sh", "true && bash etc/w.sh"):  # what a shell string runs
        assert tmp_path / "etc" / "w.sh" in runs(["sh", "-c", string], tmp_path), string
    assert tmp_path / "etc" / "w.sh" not in runs(["bash", "-c", "echo hi; tail -1 etc/w.sh"], tmp_path)  # read: data
    assert tmp_path / "tools" / "mod.py" in runs(["python3", "-m", "tools.mod"], tmp_path)
    assert tmp_path / "__cwd__.py" in runs(["python3", "-c", "import json"], tmp_path)  # imports from its cwd
    assert tmp_path / "__cwd__.py" not in runs([sys.executable, "-I", "-c", "import json"], tmp_path)  # not so
    assert runs(["true"], tmp_path) == [Path(__import__("shutil").which("true"))]


def test_python_from_a_directory_an_agent_may_add_files_to(tmp_path: Path) -> None:
    from types import SimpleNamespace

    whole = SimpleNamespace(scope=SimpleNamespace(paths=(), forbid=(), writable=()))
    argv = [sys.executable, "-m", "tool"]
    problem = command_problem("[wakeup] command", argv, tmp_path, {"w": whole}, tmp_path)
    assert problem and "its working directory (Python imports from it)" in problem and "'w'" in problem
    assert command_problem("[wakeup] command", [sys.executable, "-I", "-m", "json.tool"], tmp_path, {"w": whole},
                           tmp_path) is None
    assert json.dumps(problem)  # a plain string, for check and the log


def _unit(*paths: str, writable: tuple[str, ...] = ()) -> object:
    from types import SimpleNamespace

    return SimpleNamespace(scope=SimpleNamespace(paths=paths, forbid=(), writable=writable))


def test_a_script_that_does_not_exist_yet_is_what_an_agent_would_create(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    units = {"a": _unit("etc/**"), "b": _unit("src/**")}
    for argv in (["sh", "etc/later.sh"], ["bash", "-e", "etc/later.sh"], ["./etc/later.sh"],
                 [sys.executable, "-X", "dev", "etc/later.py"], ["node", "--", "etc/later.js"]):
        problem = command_problem("[wakeup] command", argv, tmp_path, units, tmp_path)
        assert problem and "etc/later." in problem and "unit 'a'" in problem, argv
        assert command_problem("[wakeup] command", argv, tmp_path, {"b": units["b"]}, tmp_path) is None, argv
    # inline code names no script; an argument that is no file yet (an option's value) is not one either
    assert command_problem("[wakeup] command", ["node", "-e", "etc/x.js"], tmp_path, units, tmp_path) is None
    assert command_problem("[wakeup] command", ["bash", "-o", "etc/x", "-c", "true"], tmp_path, units,
                           tmp_path) is None
    assert command_problem("[wakeup] command", ["echo", "etc/x.sh"], tmp_path, units, tmp_path) is None
    # a directory runs only as an interpreter's script (python tool/ runs tool/__main__.py), never as a value
    assert command_problem("[wakeup] command", ["true", "--root", "etc"], tmp_path, units, tmp_path) is None
    assert "runs etc" in (command_problem("[wakeup] command", [sys.executable, "-I", "etc"], tmp_path, units,
                                          tmp_path) or "")
    (tmp_path / "etc" / "there.sh").write_text("echo\n")
    argv = ["timeout", "5", "etc/there.sh"]
    assert command_problem("[wakeup] command", argv, tmp_path, units, tmp_path) is None  # data, not run
    (tmp_path / "etc" / "there.sh").chmod(0o755)  # an executable a wrapper may run is counted
    assert "etc/there.sh" in (command_problem("[wakeup] command", argv, tmp_path, units, tmp_path) or "")


def test_a_link_counts_where_it_lies_and_where_it_points(tmp_path: Path) -> None:
    for sub in ("etc", "src", "bin"):
        (tmp_path / sub).mkdir()
    (tmp_path / "src" / "real.sh").write_text("echo\n")
    (tmp_path / "bin" / "safe.sh").write_text("echo\n")
    (tmp_path / "etc" / "to-src.sh").symlink_to(tmp_path / "src" / "real.sh")
    (tmp_path / "etc" / "to-bin.sh").symlink_to(tmp_path / "bin" / "safe.sh")
    src_writer, etc_writer = {"s": _unit("src/**")}, {"e": _unit("etc/**")}
    argv = ["sh", "etc/to-src.sh"]
    assert "unit 's'" in (command_problem("[wakeup] command", argv, tmp_path, src_writer, tmp_path) or "")
    argv = ["sh", "etc/to-bin.sh"]  # points at a safe file, but the agent may re-point the link itself
    assert "unit 'e'" in (command_problem("[wakeup] command", argv, tmp_path, etc_writer, tmp_path) or "")
    assert command_problem("[wakeup] command", argv, tmp_path, src_writer, tmp_path) is None


def test_a_data_file_an_agent_command_names_is_no_code(tmp_path: Path) -> None:
    """Two units of the whole project: b's agent logs to a file a's agent may write; that is data, not run (b
    is not refused once the file exists, at a reload or the next start), while a script of a's is."""
    (tmp_path / "b-inputs.jsonl").write_text("[]\n")
    (tmp_path / "run-b.py").write_text("print()\n")
    units = {"a": _unit(), "b": _unit()}
    argv = ["python3", "-m", "json.tool", "--input-log", str(tmp_path / "b-inputs.jsonl")]
    assert command_problem("[agent] command", argv, tmp_path, units, tmp_path, exclude="b", cwd_imports=False) is None
    problem = command_problem("[agent] command", ["python3", "run-b.py"], tmp_path, units, tmp_path, exclude="b",
                              cwd_imports=False)
    assert problem and "runs run-b.py, which the agent of unit 'a' may write" in problem


def test_an_agent_that_may_write_its_own_launcher_is_a_warning(project: Project) -> None:
    """Not refused (agentd's fence holds the next session the same), but said by check: an agent that keeps
    its own sandbox could start the next session without it."""
    root = project.root
    (root / "tools").mkdir()
    launcher = root / "tools" / "agent.sh"
    launcher.write_text("#!/bin/sh\nexec python -m supervisor.fakeagent\n")
    launcher.chmod(0o755)
    project.agentd("init")
    for name, scope in (("a", "tools/**"), ("b", "src/**")):
        project.unit(name, f'[agent]\ncommand = ["./tools/agent.sh"]\n[scope]\npaths = ["{scope}"]\n')
    out = project.agentd("check", check=False).stdout
    assert "warn   a: [agent] command runs tools/agent.sh, which the agent of unit 'a' may write: it decides " \
           "how its next session starts" in out, out
    assert "b.toml: [agent] command runs tools/agent.sh, which the agent of unit 'a' may write: agentd never " \
           "runs one agent's code as another unit" in out, out  # another unit's launcher: refused
    assert "warn   b:" not in out
