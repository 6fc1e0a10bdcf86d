"""The codex adapter's pure parts: launch (sandbox, hooks, the wakeup), hook meanings and answers, the window.

The real CLI is exercised in tests/test_codex_e2e.py.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from supervisor.adapters import make_adapter
from supervisor.adapters.base import Meaning
from supervisor.adapters.codex import KICKOFF, CodexAdapter, hook_hash, trust_workdir
from supervisor.config.settings import Settings
from supervisor.config.units import parse_unit
from supervisor.memory.scaffold import init_store

THREAD = "01a23214-2fa0-7c11-aaf3-9dcf52e0b52d"


def make(tmp_path: Path, extra: str = "") -> CodexAdapter:
    binary = tmp_path / "bin" / "codex"
    binary.parent.mkdir(exist_ok=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    text = f'[agent]\nkind = "codex"\ncommand = ["{binary}"]\n[codex]\nhome = "private"\n{extra}\n'
    spec = parse_unit(tmp_path / "units" / "cx.toml", text)
    adapter = make_adapter(spec, Settings(project_root=tmp_path))
    assert isinstance(adapter, CodexAdapter)
    return adapter


def overrides(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]


def value(argv: list[str], key: str) -> Any:
    found = [o for o in overrides(argv) if o.startswith(key + "=")]
    assert len(found) == 1, (key, found)
    return tomllib.loads("v = " + found[0][len(key) + 1:])["v"]


def rollout(home: Path, thread: str = THREAD, at: float | None = None) -> Path:
    """A rollout path in the day folder Codex would use at ``at`` (default: now; never a fixed date)."""
    t = time.localtime(time.time() if at is None else at)
    day = home / "sessions" / time.strftime("%Y/%m/%d", t)
    day.mkdir(parents=True, exist_ok=True)
    return day / f"rollout-{time.strftime('%Y-%m-%dT%H-%M-%S', t)}-{thread}.jsonl"


def line(payload: dict[str, Any], kind: str = "event_msg") -> str:
    return json.dumps({"type": kind, "payload": payload}) + "\n"


def test_the_safe_default_keeps_codex_sandbox_writing_the_scope_and_the_inbox_only(tmp_path: Path) -> None:
    init_store(tmp_path)
    (tmp_path / "src" / "api").mkdir(parents=True)
    (tmp_path / ".git" / "objects").mkdir(parents=True)
    (tmp_path / ".git" / "config").write_text("")
    (tmp_path / "units").mkdir()
    adapter = make(tmp_path, '[scope]\npaths = ["src/api/**"]\n')
    launch = adapter.launch("THE WAKEUP", "s1", {"HOME": str(tmp_path / "home")})
    argv = launch.argv
    assert "--dangerously-bypass-approvals-and-sandbox" not in argv and "--dangerously-bypass-hook-trust" not in argv
    assert "--sandbox" not in argv  # a legacy sandbox_mode would switch the permission profile off
    assert argv[argv.index("--ask-for-approval") + 1] == "never"
    assert value(argv, "default_permissions") == "agentd"
    root = tmp_path.resolve()
    tmp, state = Path(launch.env["TMPDIR"]), root / ".agentd"
    table = value(argv, "permissions.agentd.filesystem")
    writes = {path for path, access in table.items() if access == "write"}
    assert writes == {str(root / "src" / "api"), str(tmp), str(state / "inbox" / "cx"), str(root / ".git")}
    assert table[":root"] == table[str(root)] == "read"  # the workdir itself is not writable: the scope is
    assert table[str(state)] == "none"  # agentd's state unreadable, but for the unit's inbox and temp dir
    for person in (".agent", "units", ".codex", ".agents", ".git/config", ".git/hooks", ".git/info"):
        assert table[str(root / person)] == "read", person
    box = adapter.sandbox()
    assert box.mode == "workspace-write" and not box.bypassed and box.warning is None
    assert set(box.writable) == writes


def test_bypass_is_explicit_and_warns_without_the_fence_and_the_fence_implies_it(tmp_path: Path) -> None:
    adapter = make(tmp_path, "bypass_sandbox = true\n")
    argv = adapter.launch(None, "s1", {}).argv
    assert "--dangerously-bypass-approvals-and-sandbox" in argv and "--sandbox" not in argv
    box = adapter.sandbox()
    assert box.bypassed and not box.fenced and "bypass_sandbox" in (box.warning or "")
    # the person's own choice in [agent] command is left alone
    own = make(tmp_path, "")
    own.spec = own.spec.model_copy(update={"agent": own.spec.agent.model_copy(update={"command": (*own.spec.agent.command, "-s", "read-only")})})
    assert "--sandbox" not in own.launch(None, "s2", {}).argv


def test_the_fence_is_the_sandbox_for_codex(tmp_path: Path) -> None:
    adapter = make(tmp_path)
    # by default ("auto") Codex keeps its own sandbox, and agentd's fence stands aside for it
    assert adapter.sandbox().mode == "workspace-write" and adapter.own_sandbox() == "codex workspace-write"
    fenced = adapter.spec.scope.model_copy(update={"fence": "on"})
    adapter.spec = adapter.spec.model_copy(update={"scope": fenced})
    box = adapter.sandbox()
    assert box.bypassed and box.fenced and box.warning is None  # bubblewrap cannot run inside Landlock
    assert adapter.own_sandbox() is None  # so agentd's fence is the sandbox


def test_the_wakeup_is_developer_instructions_with_a_short_kickoff(tmp_path: Path) -> None:
    adapter = make(tmp_path)
    wakeup = 'Task: "port" the parser\nHard constraints:\n- never\tdrop \\ users'
    launch = adapter.launch(wakeup, "s1", {})
    assert value(launch.argv, "developer_instructions") == wakeup
    assert launch.argv[-2:] == ["--", KICKOFF] and launch.wakeup_via == "developer-instructions"
    assert Path(launch.env["AGENTD_WAKEUP_FILE"]).read_text() == wakeup
    none = make(tmp_path, "").spec
    quiet = make(tmp_path)
    quiet.spec = none.model_copy(update={"agent": none.agent.model_copy(update={"wakeup_via": "none"})})
    launch = quiet.launch(wakeup, "s2", {})
    assert KICKOFF not in launch.argv and launch.wakeup_via == "none"
    assert not [o for o in overrides(launch.argv) if o.startswith("developer_instructions=")]


def test_hooks_are_session_flags_trusted_by_their_hash(tmp_path: Path) -> None:
    adapter = make(tmp_path)
    argv = adapter.launch(None, "s1", {}).argv
    state = value(argv, "hooks.state")
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PreCompact", "PostCompact"):
        (group,) = value(argv, f"hooks.{event}")
        (handler,) = group["hooks"]
        assert shlex.split(handler["command"])[-3:] == ["notify", "--unit", "cx"]
        snake = {"SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit", "PreToolUse": "pre_tool_use",
                 "PreCompact": "pre_compact", "PostCompact": "post_compact"}[event]
        entry = state[f"/<session-flags>/config.toml:{snake}:0:0"]
        identity = {"event_name": snake, "hooks": [{"async": False, "command": handler["command"],
                                                    "timeout": handler["timeout"], "type": "command"}]}
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        assert entry == {"trusted_hash": f"sha256:{digest}", "enabled": True}
        assert hook_hash(event, handler["command"]) == f"sha256:{digest}"
    assert "Stop" not in [o.split("=")[0].split(".")[-1] for o in overrides(argv)]  # notify stays the turn end
    off = make(tmp_path, "hooks = false\n")
    assert not [o for o in overrides(off.launch(None, "s2", {}).argv) if o.startswith("hooks.")]


def test_the_private_home_is_trusted_and_imports_the_login(tmp_path: Path) -> None:
    person = tmp_path / "person-codex"
    person.mkdir()
    (person / "auth.json").write_text('{"token": "t"}')
    adapter = make(tmp_path)
    launch = adapter.launch(None, "s1", {"CODEX_HOME": str(person)})
    home = Path(launch.env["CODEX_HOME"])
    assert home == tmp_path / ".agentd" / "codex" / "cx"
    config = tomllib.loads((home / "config.toml").read_text())
    assert config["projects"][str(tmp_path.resolve())]["trust_level"] == "trusted"
    assert (home / "auth.json").read_text() == '{"token": "t"}'
    assert sorted(p.name for p in person.iterdir()) == ["auth.json"]  # the person's home is not written


def test_trust_workdir_adds_only_its_entry_and_refuses_to_override_a_choice(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('model = "o3"\n\n[tui]\nx = 1\n')
    assert trust_workdir(config, Path("/work/app")) is True
    data = tomllib.loads(config.read_text())
    assert data["model"] == "o3" and data["tui"] == {"x": 1}
    assert data["projects"]["/work/app"]["trust_level"] == "trusted"
    assert trust_workdir(config, Path("/work/app")) is False
    config.write_text('[projects."/work/b"]\ntrust_level = "untrusted"\n')
    with pytest.raises(ValueError, match="change it by hand"):
        trust_workdir(config, Path("/work/b"))


def test_hook_events_mean_and_answer(tmp_path: Path) -> None:
    init_store(tmp_path)
    (tmp_path / ".agent" / "constraints.md").write_text("# Hard constraints\n\n- Never drop the users table.\n")
    adapter = make(tmp_path)
    launch = adapter.launch("W", "s1", {})
    home = Path(launch.env["CODEX_HOME"])
    path = rollout(home)
    path.write_text(line({"cwd": str(tmp_path)}, "session_meta") + line({"type": "task_started", "turn_id": "t1"}))
    s = SimpleNamespace(session_id="s1", env={}, cwd=tmp_path)
    watcher = adapter.watcher(s)
    base = {"session_id": THREAD, "cwd": str(tmp_path)}
    prompt = {**base, "hook_event_name": "UserPromptSubmit", "turn_id": "t1", "prompt": KICKOFF}
    meanings = adapter.on_agent_event(s, prompt)
    assert meanings == [Meaning.TURN_BEGAN]
    answer = json.loads(adapter.hook_output(prompt, meanings, None) or "")["hookSpecificOutput"]
    assert answer["hookEventName"] == "UserPromptSubmit" and "Never drop the users table." in answer["additionalContext"]
    # the hidden title thread's hooks get nothing
    title = {**prompt, "session_id": "01a23214-0000-0000-0000-000000000000"}
    assert adapter.on_agent_event(s, title) == [] and adapter.hook_output(title, [], None) is None
    # compaction: an automatic one starts a checkpoint, and SessionStart(compact) is answered with the wakeup
    assert adapter.on_agent_event(s, {**base, "hook_event_name": "PreCompact", "trigger": "auto"}) == [Meaning.PRE_COMPACT]
    assert adapter.on_agent_event(s, {**base, "hook_event_name": "PostCompact", "trigger": "auto"}) == []
    compact = {**base, "hook_event_name": "SessionStart", "source": "compact"}
    meanings = adapter.on_agent_event(s, compact)
    assert meanings == [Meaning.COMPACTED, Meaning.OWN_COMPACTION]
    answer = json.loads(adapter.hook_output(compact, meanings, "FRESH WAKEUP") or "")["hookSpecificOutput"]
    assert answer == {"hookEventName": "SessionStart", "additionalContext": "FRESH WAKEUP"}
    assert adapter.on_agent_event(s, {**base, "hook_event_name": "PreCompact", "trigger": "manual"}) == []
    assert adapter.on_agent_event(s, compact) == [Meaning.COMPACTED]  # a /compact a person typed
    # with hooks on, the rollout's compacted line does not make agentd type the wakeup as well
    with open(path, "a") as f:
        f.write(line({}, "compacted") + line({"type": "task_complete", "turn_id": "t1"}))
    notify = {"type": "agent-turn-complete", "thread-id": THREAD, "turn-id": "t1"}
    assert adapter.on_agent_event(s, notify) == [Meaning.TURN_END]
    watcher.turn_ended()
    # a turn someone else began (attach): busy until that turn ends in the rollout
    assert adapter.on_agent_event(s, {**prompt, "turn_id": "t2"}) == [Meaning.TURN_BEGAN]
    assert not watcher.idle and not watcher.poll()
    with open(path, "a") as f:
        f.write(line({"type": "task_started", "turn_id": "t2"}) + line({"type": "task_complete", "turn_id": "t2"}))
    assert watcher.poll()


def test_hooks_off_types_the_wakeup_after_a_compaction(tmp_path: Path) -> None:
    adapter = make(tmp_path, "hooks = false\n")
    launch = adapter.launch("W", "s1", {})
    path = rollout(Path(launch.env["CODEX_HOME"]))
    path.write_text(line({"cwd": str(tmp_path)}, "session_meta") + line({"type": "task_started", "turn_id": "t1"})
                    + line({}, "compacted"))
    s = SimpleNamespace(session_id="s1", env={}, cwd=tmp_path)
    adapter.watcher(s)
    notify = {"type": "agent-turn-complete", "thread-id": THREAD, "turn-id": "t1"}
    assert adapter.on_agent_event(s, notify) == [Meaning.TURN_END, Meaning.COMPACTED, Meaning.INJECT_WAKEUP]


def test_the_window_is_the_smaller_of_the_units_and_codexs_and_a_disagreement_warns(tmp_path: Path) -> None:
    """Issue 26 §1: the smaller window wins, whichever says it; Codex's own compaction goes above hard_limit of it."""
    def figure_after(adapter: CodexAdapter, session: str, reported: int, used: int) -> Any:
        launch = adapter.launch(None, session, {})
        s = SimpleNamespace(session_id=session, env={}, cwd=adapter.settings.project_root)
        before = adapter.context(s)
        path = rollout(Path(launch.env["CODEX_HOME"]), thread=THREAD[:-1] + session[-1])
        path.write_text(line({"cwd": str(adapter.settings.project_root)}, "session_meta") + line(
            {"type": "token_count", "info": {"last_token_usage": {"total_tokens": used}, "model_context_window": reported}}))
        adapter._sessions[session].next_scan = 0.0  # the rollout search is throttled to twice a second
        return launch, before, adapter.context(s)

    def folder(name: str) -> Path:
        (tmp_path / name).mkdir()
        return tmp_path / name

    # the agent's is smaller (Codex says 95 % of the model_context_window it was told): Codex's, with a warning
    big = make(folder("big"), "model_context_window = 100000\n[context]\nwindow = 400000\n")
    launch, before, after = figure_after(big, "s1", 95000, 47500)
    assert value(launch.argv, "model_context_window") == 100000
    assert value(launch.argv, "model_auto_compact_token_limit") == 92000  # 92 % of the smaller: 100000 vs 400000
    assert (before.window, before.window_source.value, before.window_warning) == (400_000, "unit", None)
    assert (after.used, after.window, after.ratio, after.exact) == (47500, 95000, 0.5, True)
    assert after.window_source.value == "agent" and "uses the smaller, 95000" in (after.window_warning or "")
    # the unit's is smaller (Codex's fallback window for a model it does not know): the unit's, with a warning
    small = make(folder("small"), "[context]\nwindow = 200000\nhard_limit = 0.95\n")
    launch, before, after = figure_after(small, "s2", 258400, 150000)
    assert value(launch.argv, "model_auto_compact_token_limit") == 192000  # above hard_limit: 96 % of 200000
    assert (after.window, after.window_source.value, after.ratio) == (200_000, "unit", 0.75)
    assert "258400" in (after.window_warning or "") and "uses the smaller, 200000" in after.window_warning
    # close enough (within 10 %): the smaller, no warning
    near = make(folder("near"), "[context]\nwindow = 250000\n")
    assert figure_after(near, "s3", 258400, 1000)[2].window_warning is None
    assert figure_after(near, "s4", 258400, 1000)[2].window == 250_000
    # no window from the unit: nothing passed to Codex, no warning, Codex's window used
    plain = make(folder("plain"))
    launch, before, after = figure_after(plain, "s5", 258400, 1000)
    assert not [o for o in overrides(launch.argv) if o.startswith(("model_context_window=", "model_auto_compact_token_limit="))]
    assert (before.window_source.value, after.window, after.window_source.value, after.window_warning) == (
        "default", 258400, "agent", None)


def test_the_rollout_folders_searched_span_the_sessions_whole_life(tmp_path: Path) -> None:
    from supervisor.adapters.codex.rollout import day_dirs

    sessions = tmp_path / "sessions"
    launch = time.mktime((2026, 11, 28, 23, 30, 0, 0, 0, -1))  # a fixed local time: no test depends on today
    for day in ("2026/11/26", "2026/11/27", "2026/11/28", "2026/11/30", "2026/12/03", "2026/12/04", "2026/12/05"):
        (sessions / day).mkdir(parents=True)
    found = [str(d.relative_to(sessions)) for d in day_dirs(sessions, launch, launch + 4 * 86400)]
    # launched on the 28th, searched on 2 December: from the 27th (a day's margin for UTC) to the 3rd
    assert found == ["2026/11/27", "2026/11/28", "2026/11/30", "2026/12/03"]
    assert [str(d.relative_to(sessions)) for d in day_dirs(sessions, launch, launch)] == [
        "2026/11/27", "2026/11/28"]


def test_a_session_whose_first_turn_comes_days_after_its_launch_finds_its_rollout(tmp_path: Path) -> None:
    adapter = make(tmp_path)
    launch = adapter.launch(None, "s1", {})
    state = adapter._sessions["s1"]
    clock = [state.started_wall + 3 * 86400 + 600]
    state.wall = lambda: clock[0]
    path = rollout(Path(launch.env["CODEX_HOME"]), at=clock[0])  # created three days after the launch
    path.write_text(line({"cwd": str(tmp_path)}, "session_meta") + line(
        {"type": "token_count", "info": {"last_token_usage": {"total_tokens": 1000}, "model_context_window": 95000}}))
    s = SimpleNamespace(session_id="s1", env={}, cwd=tmp_path)
    assert adapter.context(s).used == 1000


def test_a_trust_screen_is_blocked_with_what_to_do_or_answered(tmp_path: Path) -> None:
    from supervisor.adapters import screens

    for extra, answered in (("", False), ('trust = "accept"\n', True)):
        adapter = make(tmp_path, extra)
        adapter.launch(None, "s1", {})
        s = SimpleNamespace(session_id="s1", env={}, cwd=tmp_path)
        watcher = adapter.watcher(s)
        watcher.feed(b"\x1b[2J\x1b[H  Folder access\r\n  Trust this folder? Codex can read, edit, and run files here\r\n"
                     b"\xe2\x80\xba 1. Trust and continue\r\n  2. Back\r\n")
        probe = adapter._sessions["s1"].probe
        probe.last_output_at -= screens.QUIET
        blocked = adapter.blocked(s)
        assert blocked is not None and blocked.kind.value == "trust"
        assert (blocked.answer is not None) is answered
        if not answered:
            assert "agentd trust cx" in blocked.todo


def test_agentd_check_warns_about_a_bypass_and_an_untrusted_git_workdir(tmp_path: Path) -> None:
    from supervisor.adapters.checks import agent_warnings

    person = tmp_path / "person-codex"
    KEYED = {"OPENAI_API_KEY": "sk-proj-k"}
    adapter = make(tmp_path, "bypass_sandbox = true\n")
    assert any("bypass_sandbox" in w for w in agent_warnings(adapter.spec, adapter.settings, {}))
    spec = make(tmp_path, "").spec
    spec = spec.model_copy(update={"codex": spec.codex.model_copy(update={"home": str(person)})})
    assert agent_warnings(spec, adapter.settings, KEYED) == []  # not a git repository: Codex does not ask
    (tmp_path / ".git").mkdir()
    (warning,) = agent_warnings(spec, adapter.settings, KEYED)
    assert "Trust this folder?" in warning and "agentd trust cx" in warning
    assert not person.exists()  # checking created nothing
    trust_workdir(person / "config.toml", tmp_path.resolve())
    assert agent_warnings(spec, adapter.settings, KEYED) == []
