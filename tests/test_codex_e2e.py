"""The codex adapter end to end with the REAL Codex CLI (``@openai/codex`` 0.169.0) and a fake model.

Nothing leaves the machine: the daemon, Codex and the fake Responses server
(tests/fake_responses.py) run inside a user + network namespace that has only
loopback (tests/codex_jail.py; the fixtures: tests/codex_fixtures.py).  The test itself stays outside and talks to
the daemon through its control socket, a filesystem object reachable from any
network namespace (the namespace maps our uid to its root, so the socket's
SO_PEERCRED check sees the same uid on both sides).

Codex comes from ``tests/install_codex.sh`` (``.cache/npm``) or ``$AGENTD_CODEX_BIN``.
Without it (or without namespace support) the tests are skipped with the
reason, which fails them under CI (tests/conftest.py).  Processes are counted
in the jail's own network namespace, never machine-wide, so Codex runs of
other tests or sessions on the machine do not count.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import psutil

from supervisor.adapters.codex import KICKOFF
from tests.codex_fixtures import PORT, Jail, codex_bin, jail, wait_idle
from tests.conftest import (
    Project,
    alive,
    processes_in_namespace,
    processes_of,
    wait_until,
)

__all__ = ["codex_bin", "jail"]

WINDOW = 100_000  # the model's window agentd tells Codex ([codex] model_context_window)
AGENT_WINDOW = 95_000  # Codex reports 95 % of it in token_count: the window agentd uses
DECISION = "Keep the parser API stable for v2 clients"
CONSTRAINT = "Never drop the users table."


def user_messages(request: dict[str, Any]) -> list[str]:
    out = []
    for item in request["body"].get("input") or []:
        if item.get("type") == "message" and item.get("role") == "user":
            content = item.get("content")
            out.append(content if isinstance(content, str) else "\n".join(s.get("text", "") for s in content or []))
    return out


def codex_processes(jail: Jail, binary: Path) -> list[psutil.Process]:
    """The jail's live Codex processes (the TUI, an app-server, anything run from the binary)."""
    return [p for p in processes_in_namespace(jail.namespace)
            if p.info["exe"] == str(binary) or "app-server" in " ".join((p.info["cmdline"] or [])[:3])]


def developer_messages(request: dict[str, Any]) -> list[str]:
    out = []
    for item in request["body"].get("input") or []:
        if item.get("type") == "message" and item.get("role") == "developer":
            content = item.get("content")
            out.append(content if isinstance(content, str) else "\n".join(s.get("text", "") for s in content or []))
    return out


def developer_text(request: dict[str, Any]) -> str:
    return "\n".join(developer_messages(request))


def setup(project: Project, binary: Path, restart: str = "", extra: str = "", codex: str = 'home = "private"',
          checkpoint: str = "") -> None:
    """A Codex unit in the safe default: Codex's own sandbox, its workdir and scope the module's directory cx/."""
    project.agentd("init")
    (project.root / "cx").mkdir()
    agent = project.root / ".agent"
    (agent / "constraints.md").write_text(f"# Hard constraints\n\n- {CONSTRAINT}\n")
    (agent / "current-task.md").write_text("# Current task\n\nPort the parser to the new API.\n\nState at interruption: (not set)\n")
    project.agentd("decide", DECISION, "--why", "because v2 clients pin it, so changes go behind a flag", "--module", "cx")
    project.unit(
        "cx",
        f"""
[agent]
kind = "codex"
command = [{json.dumps(str(binary))}]
workdir = "cx"
rows = 40
cols = 120
[scope]
paths = ["cx/**"]
[codex]
{codex}
model = "fake-model"
model_context_window = {WINDOW}
base_url = "http://127.0.0.1:{PORT}/v1"
request_max_retries = 1
stream_max_retries = 1
[restart]
stop_timeout = 5
initial_delay = 1
max_delay = 2
{restart}
[context]
window = {WINDOW}
checkpoint_at = 0.70
[checkpoint]
deadline = 90
grace = 5
ready_timeout = 60
{checkpoint}
{extra}
""",
    )


def _live(proc: psutil.Process) -> bool:
    """Not ended: a dead orphan can show as a zombie for a moment (PID 1 here reaps late)."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# ------------------------------------------------------------------------------------------ scenarios


def test_the_wakeup_is_a_developer_message_and_every_turn_carries_the_constraints(
    project: Project, jail: Jail, codex_bin: Path
) -> None:
    setup(project, codex_bin)
    jail.start()
    row = wait_idle(project)
    assert row["wakeup"] == "delivered via developer-instructions"
    assert row["sandbox"]["mode"] == "workspace-write" and not row["sandbox"]["bypassed"]
    first = wait_until(jail.first_requests, 30, what="the first request")[0]
    assert first["path"] == "/v1/responses"
    # the wakeup is a developer message (developer_instructions), the user turn only the kickoff
    wakeup = (project.state / "sessions" / "cx" / row["session"] / "wakeup.md").read_text()
    assert CONSTRAINT in wakeup and DECISION in wakeup and "Port the parser" in wakeup
    assert any(wakeup in text for text in developer_messages(first))
    assert user_messages(first)[-1] == KICKOFF and not any(wakeup in u for u in user_messages(first))
    # UserPromptSubmit (a trusted -c hook, no bypass flag) added the constraints digest right after the prompt
    items = first["body"]["input"]
    assert items[-1]["role"] == "developer" and "hard constraint" in developer_messages(first)[-1]
    assert CONSTRAINT in developer_messages(first)[-1]
    # the notify reached the daemon (title-thread notifies are ignored) and the context is Codex's own figure
    wait_until(lambda: [e for e in project.events("agent_event") if e.get("unit") == "cx" and e["meanings"] == ["turn_end"]],
               30, what="the main thread's notify")
    ctx = wait_until(lambda: (project.unit_status("cx") or {}).get("context") or None, 10, what="a context figure")
    assert ctx["exact"] is True and ctx["used"] > 0
    assert ctx["window"] == AGENT_WINDOW and ctx["window_source"] == "agent" and ctx["window_warning"] is None
    # a typed message is one more turn (text, pause, Enter), with the digest again
    project.agentd("send", "cx", "hello from the test")
    typed = wait_until(lambda: [r for r in jail.requests() if "hello from the test" in (user_messages(r) or [""])[-1]], 30,
                       what="the typed message")[0]
    assert CONSTRAINT in developer_messages(typed)[-1]
    wait_idle(project)


def test_codex_keeps_its_sandbox_writes_in_the_scope_and_agent_dir_and_refuses_the_rest(
    project: Project, jail: Jail, codex_bin: Path
) -> None:
    setup(project, codex_bin)
    (project.root / "cx" / "parser.py").write_text("VERSION = 2\n")
    project.agentd("fact", "add", "the parser speaks API v2", "--source", "cx/parser.py:1", "--module", "cx")
    outside = project.root / "outside.txt"  # the project root: outside the unit's scope cx/
    jail.start()
    wait_idle(project)
    project.agentd("send", "cx", f"RUN: echo in-scope > {project.root}/cx/inside.txt; echo nope > {outside}; echo done")
    reply = wait_until(lambda: [r for r in jail.requests() if (r["body"]["input"] or [{}])[-1].get("type") == "function_call_output"],
                       60, what="the command's output")[0]
    output = str(reply["body"]["input"][-1].get("output"))
    assert "Read-only file system" in output or "Permission denied" in output, output
    assert (project.root / "cx" / "inside.txt").read_text() == "in-scope\n"
    assert not outside.exists()
    # PreToolUse on that write inside module cx added the module's facts, right after the call
    facts = [m for m in developer_messages(reply) if "known facts of module cx" in m]
    assert len(facts) == 1 and "the parser speaks API v2" in facts[0]
    wait_idle(project)
    project.agentd("send", "cx", f"RUN: echo again >> {project.root}/cx/inside.txt")
    again = wait_until(lambda: [r for r in jail.requests() if "again" in json.dumps(r["body"]["input"][-2:])
                                and r["body"]["input"][-1].get("type") == "function_call_output"], 60, what="the second write")[0]
    assert len([m for m in developer_messages(again) if "known facts of module cx" in m]) == 1  # once per session
    wait_idle(project)
    # the checkpoint's own writes to .agent/ (outside the workdir) still work from the agent's shell
    jail.call(op="control", engram="confirmed: written from inside the sandbox", decision="Sandboxed decision")
    project.agentd("checkpoint", "cx", timeout=180)
    record = project.history("cx")[-1]
    assert record["flush"] == "verified" and record["outcome"] == "respawned", record
    assert "confirmed: written from inside the sandbox" in (project.root / ".agent" / "engram.md").read_text()
    assert "Sandboxed decision" in (project.root / ".agent" / "decisions-cx.log").read_text()


def test_threshold_checkpoint_flushes_through_codex_and_the_new_session_starts_from_it(
    project: Project, jail: Jail, codex_bin: Path
) -> None:
    setup(project, codex_bin)
    jail.start()
    old = wait_idle(project)
    jail.call(op="control", input_tokens=80_000, decision="Adopt the fake model's checkpoint plan",
              engram="confirmed: the parser port compiles")
    project.agentd("send", "cx", "work on the parser")
    wait_until(lambda: (project.unit_status("cx") or {}).get("state") in ("checkpointing", "respawning") or project.history("cx"),
               60, what="the checkpoint to start")
    jail.call(op="control", input_tokens=None)  # the fresh session reports small usage again
    record = wait_until(lambda: project.history("cx") and project.history("cx")[0], 120, what="the cycle")
    assert record["trigger"] == "threshold" and record["flush"] == "verified" and record["outcome"] == "respawned", record
    assert record["exact"] is True and record["window"] == AGENT_WINDOW and record["tokens_before"] == 80_007
    assert record["old_session"] == old["session"]
    engram = (project.root / ".agent" / "engram.md").read_text()
    assert "confirmed: the parser port compiles" in engram
    assert "Adopt the fake model's checkpoint plan" in (project.root / ".agent" / "decisions-cx.log").read_text()
    # the old Codex quit through /quit (exit 0)
    exits = wait_until(lambda: [e for e in project.events("session_exited") if e.get("session") == old["session"]], 30,
                       what="the old session's exit in agentd's log (written off the loop)")
    assert exits[-1]["exit"] == "exit 0", exits
    new = wait_idle(project)
    assert new["session"] == record["new_session"] != old["session"]
    firsts = wait_until(lambda: len(jail.first_requests()) >= 2 and jail.first_requests(), 60, what="the new session's request")
    wakeup = developer_text(firsts[-1])
    assert "Adopt the fake model's checkpoint plan" in wakeup and "confirmed: the parser port compiles" in wakeup
    assert CONSTRAINT in wakeup and user_messages(firsts[-1])[-1] == KICKOFF
    assert not alive(old["pid"])
    assert [p.pid for p in codex_processes(jail, codex_bin)] == [new["pid"]]


def test_kill_9_restarts_from_the_wakeup_and_leaves_nothing(project: Project, jail: Jail, codex_bin: Path) -> None:
    setup(project, codex_bin)
    jail.start()
    old = wait_idle(project)
    assert [p.pid for p in codex_processes(jail, codex_bin)] == [old["pid"]]
    os.kill(old["pid"], signal.SIGKILL)
    new = wait_until(lambda: (r := project.unit_status("cx")) and r["state"] == "running" and r["session"] != old["session"]
                     and r["turn"] == "idle" and r, 60, what="the restarted session")
    assert new["restarts"] == 1 and "SIGKILL" in (new["last_exit"] or "")
    firsts = wait_until(lambda: len(jail.first_requests()) >= 2 and jail.first_requests(), 30, what="the restart's first request")
    wakeup = developer_text(firsts[-1])
    assert CONSTRAINT in wakeup and DECISION in wakeup
    assert [p.pid for p in codex_processes(jail, codex_bin)] == [new["pid"]]  # no app-server either


def test_unreachable_model_server_is_a_clear_state_and_recovers(project: Project, jail: Jail, codex_bin: Path) -> None:
    setup(project, codex_bin, restart="burst = 50")
    jail.start()
    wait_idle(project)
    jail.call(op="server", up=False)
    project.agentd("send", "cx", "this request cannot reach the model")
    row = wait_until(lambda: (r := project.unit_status("cx")) and r["state"] in ("backoff", "failed") and r, 60,
                     what="the unit to leave running")
    assert "model server unreachable" in row["reason"] and "Connection failed" in row["reason"], row
    assert [e for e in project.events("session_failed") if e.get("unit") == "cx"]
    before = len(jail.first_requests())
    jail.call(op="server", up=True)
    new = wait_idle(project, 90)
    assert new["reason"] is None
    wait_until(lambda: len(jail.first_requests()) > before, 30, what="a request after the server came back")
    assert CONSTRAINT in developer_text(jail.first_requests()[-1])
    assert [p.pid for p in codex_processes(jail, codex_bin)] == [new["pid"]]


def test_stop_checkpoints_quits_with_exit_0_and_leaves_nothing(project: Project, jail: Jail, codex_bin: Path) -> None:
    setup(project, codex_bin)
    jail.start()
    row = wait_idle(project)
    jail.call(op="control", engram="confirmed: stop flushed")
    project.agentd("stop")
    wait_until(lambda: jail.proc is not None and not alive(project.daemon_pid() or 0), 60, what="the daemon to exit")
    record = project.history("cx")[-1]
    assert record["trigger"] == "stop" and record["flush"] == "verified" and record["outcome"] == "stopped", record
    assert "confirmed: stop flushed" in (project.root / ".agent" / "engram.md").read_text()
    exits = [e for e in project.events("session_exited") if e.get("session") == row["session"]]
    assert exits and exits[-1]["exit"] == "exit 0", exits
    assert not codex_processes(jail, codex_bin)
    assert not processes_of(project.root)


def test_codex_own_compaction_gets_the_wakeup_through_the_hook_and_an_idle_agent_is_named(
    project: Project, jail: Jail, codex_bin: Path
) -> None:
    """A real Codex compaction: SessionStart(compact) is answered with the wakeup, which the next request
    carries; the agent then sits at that turn's end, and agentd names it idle_after_compaction."""
    setup(project, codex_bin, codex='home = "private"\noverrides = ["model_auto_compact_token_limit=30000"]',
          checkpoint="enabled = false", extra="[freeze]\nafter = 4\nidle_after_compaction = \"notify\"\n")
    jail.start()
    wait_idle(project)
    jail.call(op="control", input_tokens=40_000)  # above Codex's own limit, far below agentd's thresholds
    project.agentd("send", "cx", "grow the context")
    wait_until(lambda: any("grow the context" in (user_messages(r) or [""])[-1] for r in jail.requests()), 30,
               what="the growing turn")
    wait_idle(project)
    jail.call(op="control", input_tokens=None)
    project.agentd("send", "cx", "after the compaction")
    compaction = wait_until(lambda: [r for r in jail.requests() if (r.get("meta") or {}).get("request_kind") == "compaction"],
                            60, what="Codex's own compaction request")[0]
    after = wait_until(lambda: [r for r in jail.requests() if r["seq"] > compaction["seq"]
                                and (r.get("meta") or {}).get("request_kind") != "compaction"], 60,
                       what="the request after the compaction")[0]
    wakeup = project.agentd("wakeup", "cx").stdout.strip()
    assert any(wakeup in m for m in developer_messages(after)), developer_messages(after)[-3:]
    records = wait_until(lambda: [r for r in project.history("cx") if r["trigger"] == "agent compacted"], 30,
                         what="the compaction record")
    assert records[0]["outcome"] == "wakeup re-injected" and records[0]["wakeup_tokens"] > 0
    # the turn ends and nothing follows: named, as the unit says (notify), in status and history
    row = wait_until(lambda: (r := project.unit_status("cx")) and r.get("frozen") and r, 60, what="the freeze")
    assert row["frozen"]["state"] == "idle_after_compaction" and row["frozen"]["action"] == "notify"
    assert row["state"] == "running"
    assert [r for r in project.history("cx") if r["trigger"] == "freeze: idle_after_compaction"]
    assert "running (frozen: idle_after_compaction)" in project.agentd("status").stdout
    # typing is the agent going on: the freeze clears
    project.agentd("send", "cx", "go on")
    wait_until(lambda: (r := project.unit_status("cx")) and not r.get("frozen"), 60, what="the freeze to clear")


def test_a_codex_home_without_trust_is_shown_blocked_until_agentd_trust(project: Project, jail: Jail, codex_bin: Path) -> None:
    """The person's CODEX_HOME (no trust entry) and a workdir in a git repository: Codex 0.169.0 shows its
    trust screen despite the -c override; agentd shows the unit as blocked: trust with what to do."""
    home = project.root.parent / "person-codex"
    home.mkdir()
    (home / "config.toml").write_text('model = "fake-model"\n')
    setup(project, codex_bin, codex=f"home = {json.dumps(str(home))}", extra="[freeze]\nafter = 3\n")
    subprocess.run(["git", "init", "-q", str(project.root)], check=True)
    check = project.agentd("check").stdout
    assert "Trust this folder?" in check and "agentd trust cx" in check
    jail.start()
    row = wait_until(lambda: (r := project.unit_status("cx")) and r.get("frozen") and r, 60, what="the blocked screen")
    assert row["frozen"]["state"] == "blocked_screen" and row["frozen"]["action"] == "notify"
    assert "agentd trust cx" in row["frozen"]["detail"]
    assert "running (blocked: trust)" in project.agentd("status").stdout
    assert not jail.first_requests()  # it never got to its first model request
    assert [r for r in project.history("cx") if r["trigger"] == "freeze: blocked_screen"]
    assert "projects" not in tomllib.loads(home.joinpath("config.toml").read_text())  # nobody trusted it behind our back
    out = project.agentd("trust", "cx", "--yes").stdout
    assert "trusted" in out and str(project.root / "cx") in home.joinpath("config.toml").read_text()
    project.agentd("restart", "cx", "--now")
    wait_idle(project)
    assert wait_until(jail.first_requests, 30, what="the first request once trusted")
    assert not (project.unit_status("cx") or {}).get("frozen")


def test_a_checkpoint_decision_snapshots_changed_files_from_inside_codexs_own_sandbox(
    project: Project, jail: Jail, codex_bin: Path
) -> None:
    """Issue 25 §4 as a person runs Codex: its default sandbox, their own CODEX_HOME (whose config says
    sandbox_mode = "workspace-write" and asks for approvals), a custom base URL and no login.  The agent edits a
    file of its scope, the checkpoint's `agentd decide` runs in Codex's sandbox (.git read-only there before),
    the daemon hashes the changed file, and the next session's first request carries the decision and that file."""
    home = project.root.parent / "person-codex"
    home.mkdir()
    setup(project, codex_bin, codex=f"home = {json.dumps(str(home))}")
    root = project.root.resolve()
    (home / "config.toml").write_text(
        'sandbox_mode = "workspace-write"\napproval_policy = "on-request"\n[sandbox_workspace_write]\nnetwork_access = false\n'
        f'[projects.{json.dumps(str(root / "cx"))}]\ntrust_level = "trusted"\n')
    (root / "cx" / "parser.py").write_text("VERSION = 2\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for argv in (["config", "user.email", "t@example.com"], ["config", "user.name", "t"], ["add", "-A"],
                 ["commit", "-qm", "the project"]):
        subprocess.run(["git", *argv], cwd=root, check=True, capture_output=True)
    committed = subprocess.run(["git", "rev-parse", "HEAD:cx/parser.py"], cwd=root, capture_output=True, text=True).stdout.strip()
    jail.start()
    old = wait_idle(project)
    assert old["sandbox"]["mode"] == "workspace-write" and not old["sandbox"]["bypassed"]
    project.agentd("send", "cx", "RUN: echo 'VERSION = 3' >> parser.py && touch ../outside.txt")
    reply = wait_until(lambda: [r for r in jail.requests() if (r["body"]["input"] or [{}])[-1].get("type") == "function_call_output"],
                       60, what="the edit's output")[0]
    assert "Read-only file system" in str(reply["body"]["input"][-1].get("output"))  # the workdir's parent: refused
    assert (root / "cx" / "parser.py").read_text() == "VERSION = 2\nVERSION = 3\n"
    wait_idle(project)
    # §6: the person edits etc/agentd.toml while Codex is mid-turn; its sandbox cannot write there: nobody is blamed
    jail.call(op="control", delay=3.0)
    project.agentd("send", "cx", "think slowly")
    wait_until(lambda: project.unit_status("cx")["turn"] == "busy", 30, interval=0.05, what="the slow turn")
    (root / "etc").mkdir()
    (root / "etc" / "agentd.toml").write_text("# the person's own settings\n")
    seen = wait_until(lambda: [e for e in project.events("change_not_blamed") if e["path"] == "etc/agentd.toml"], 30,
                      what="the guard to judge the person's edit")
    assert "outside their fences" in seen[0]["why"], seen
    jail.call(op="control", delay=0.0)
    wait_idle(project)
    assert project.agentd("violations", "--json").stdout.strip() == "" and project.unit_status("cx")["violations"] == 0
    decision = "Bump the parser to version 3"
    jail.call(op="control", decision=decision, engram="confirmed: parser bumped")
    project.agentd("checkpoint", "cx", timeout=180)
    record = project.history("cx")[-1]
    assert record["flush"] == "verified" and record["outcome"] == "respawned", record
    line = (root / ".agent" / "decisions-cx.log").read_text().splitlines()[-1]
    assert f"decision: {decision}" in line and line.endswith("| by: cx")
    ident = line.split("snapshot: ")[1].split(" |")[0]
    snap = json.loads((root / ".agent" / "snapshots" / f"{ident}.json").read_text())
    now = subprocess.run(["git", "hash-object", "cx/parser.py"], cwd=root, capture_output=True, text=True).stdout.strip()
    assert snap["files"]["cx/parser.py"] == now != committed
    assert "cx/parser.py" in snap["changed"]["added"]  # since the person's decision of setup(), before parser.py
    firsts = wait_until(lambda: len(jail.first_requests()) >= 2 and jail.first_requests(), 60, what="the new session's request")
    wakeup = developer_text(firsts[-1])
    assert decision in wakeup and ident in wakeup and "confirmed: parser bumped" in wakeup
    assert re.search(r"added since \S+: cx/parser\.py", wakeup), wakeup
