"""The claude adapter's pure parts: launch, hooks, typing, the transcript meter (no binary needed).

The real CLI is exercised in tests/test_claude_e2e.py.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from supervisor.adapters import make_adapter
from supervisor.adapters.base import BRACKETED_PASTE_END, BRACKETED_PASTE_START, Turn
from supervisor.adapters.claude import KICKOFF, ClaudeAdapter, TranscriptMeter, project_dir_name
from supervisor.config.settings import Settings
from supervisor.config.units import parse_unit

KEY = "sk-ant-test-0123456789abcdefghijKLMNOP"


def make(tmp_path: Path, env: dict[str, str] | None = None, command: list[str] | None = None, extra: str = "") -> ClaudeAdapter:
    env_line = "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in (env or {}).items()) + " }" if env else ""
    text = f'[agent]\nkind = "claude"\ncommand = {json.dumps(command or ["/opt/claude"])}\n{env_line}\n{extra}\n'
    spec = parse_unit(tmp_path / "units" / "cc.toml", text)
    adapter = make_adapter(spec, Settings(project_root=tmp_path))
    assert isinstance(adapter, ClaudeAdapter)
    return adapter


def session(sid: str = "s1") -> Any:
    return SimpleNamespace(session_id=sid)


def test_launch_puts_the_wakeup_in_the_system_prompt_and_starts_a_turn(tmp_path: Path) -> None:
    adapter = make(tmp_path, env={"ANTHROPIC_API_KEY": KEY})
    launch = adapter.launch("BRIEFING text", "s1", {"ANTHROPIC_API_KEY": KEY, "IS_SANDBOX": "yes", "DISABLE_TELEMETRY": "0"})
    argv = launch.argv
    assert argv[0] == "/opt/claude" and argv[-1] == KICKOFF
    wakeup = Path(argv[argv.index("--append-system-prompt-file") + 1])
    assert wakeup.read_text() == "BRIEFING text" and launch.env["AGENTD_WAKEUP_FILE"] == str(wakeup)
    assert launch.first_input is None and launch.wakeup_via == "system-prompt"
    assert argv[-2] == "--"  # after --add-dir DIR..., the prompt must not read as one more directory
    # the safe default: Claude Code's own permission checks, edits allowed in the scope and .agent/
    assert "--dangerously-skip-permissions" not in argv and "IS_SANDBOX" not in launch.env
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    added = [argv[i + 1] for i, a in enumerate(argv) if a == "--add-dir"]
    assert added == [str(tmp_path.resolve())]  # an empty scope is the whole project (.agent/ is inside it)
    assert len(argv[argv.index("--session-id") + 1]) == 36
    # offline, and the inherited environment does not win over agentd's choices (only the unit's own env does)
    for name in ("DISABLE_AUTOUPDATER", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"):
        assert launch.env[name] == "1"
    # agentd's hooks, permissions and status line come in through its own settings file
    settings = json.loads(Path(argv[argv.index("--settings") + 1]).read_text())
    assert set(settings["hooks"]) == {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "PreToolUse", "SessionEnd"}
    assert settings["hooks"]["PreToolUse"][0]["matcher"] == "Write|Edit|MultiEdit|NotebookEdit|Bash"
    assert settings["permissions"] == {"allow": ["Bash(agentd:*)"], "denyInsteadOfPrompting": True}
    assert "skipDangerousModePermissionPrompt" not in settings
    assert "statusline.json" in settings["statusLine"]["command"]
    box = adapter.sandbox()
    assert box.mode == "acceptEdits" and not box.bypassed and box.warning is None
    command = shlex.split(settings["hooks"]["Stop"][0]["hooks"][0]["command"])
    assert command[-3:] == ["notify", "--unit", "cc"] and os.path.isabs(command[0])
    # a private, onboarded config dir with the workdir trusted and the key approved
    config = Path(launch.env["CLAUDE_CONFIG_DIR"])
    assert config == tmp_path / ".agentd" / "claude" / "cc"
    state = json.loads((config / ".claude.json").read_text())
    assert state["hasCompletedOnboarding"] and state["projects"][str(tmp_path.resolve())]["hasTrustDialogAccepted"]
    assert state["customApiKeyResponses"]["approved"] == [KEY[-20:]]


def test_launch_keeps_the_users_config_dir_and_permission_choice(tmp_path: Path) -> None:
    own = tmp_path / "my-claude"
    adapter = make(tmp_path, env={"CLAUDE_CONFIG_DIR": str(own), "DISABLE_TELEMETRY": "0"},
                   command=["/opt/claude", "--permission-mode", "acceptEdits"])
    launch = adapter.launch(None, "s1", {"CLAUDE_CONFIG_DIR": str(own), "DISABLE_TELEMETRY": "0"})
    assert "CLAUDE_CONFIG_DIR" not in launch.env and not own.exists()  # never written
    assert "DISABLE_TELEMETRY" not in launch.env and "IS_SANDBOX" not in launch.env
    assert "--dangerously-skip-permissions" not in launch.argv and KICKOFF not in launch.argv
    assert launch.wakeup_via == "none"
    watcher = adapter.watcher(session())
    assert watcher.state == Turn.UNKNOWN
    assert adapter.on_agent_event(session(), {"hook_event_name": "SessionStart", "source": "startup"}) == ["turn_end"]


def test_bypass_is_an_explicit_opt_in_with_a_warning_without_the_fence(tmp_path: Path) -> None:
    (tmp_path / "src" / "api").mkdir(parents=True)
    (tmp_path / ".agent").mkdir()
    adapter = make(tmp_path, extra='[claude]\nbypass_permissions = true\nallow = ["Bash(pytest:*)"]\n')
    launch = adapter.launch("W", "s1", {})
    assert "--dangerously-skip-permissions" in launch.argv and "--permission-mode" not in launch.argv
    if os.geteuid() == 0:
        assert launch.env["IS_SANDBOX"] == "1"  # root refuses --dangerously-skip-permissions otherwise
    settings = json.loads(Path(launch.argv[launch.argv.index("--settings") + 1]).read_text())
    assert settings["skipDangerousModePermissionPrompt"] is True and "permissions" not in settings
    box = adapter.sandbox()
    assert box.bypassed and not box.fenced and "bypass_permissions" in (box.warning or "")
    # the safe default with a scope: only the scope's directories are added (.agent/ is the daemon's to write:
    # the agent's `agentd note` goes through its inbox), plus the unit's rules
    scoped = make(tmp_path, extra='[scope]\npaths = ["src/api/**"]\n[claude]\nallow = ["Bash(pytest:*)"]\n')
    launch = scoped.launch("W", "s2", {})
    added = [launch.argv[i + 1] for i, a in enumerate(launch.argv) if a == "--add-dir"]
    assert added == [str(tmp_path.resolve() / "src" / "api")]
    # each added directory is trusted in agentd's private config dir (else Claude Code asks about it)
    state = json.loads((Path(launch.env["CLAUDE_CONFIG_DIR"]) / ".claude.json").read_text())
    assert all(state["projects"][d]["hasTrustDialogAccepted"] for d in added)
    settings = json.loads(Path(launch.argv[launch.argv.index("--settings") + 1]).read_text())
    assert settings["permissions"]["allow"] == ["Bash(agentd:*)", "Bash(pytest:*)"]


def test_hooks_add_the_constraints_to_every_turn_and_a_modules_facts_once(tmp_path: Path) -> None:
    from supervisor.memory.facts import add_fact

    from supervisor.memory.scaffold import init_store

    root = tmp_path
    init_store(root)
    (root / ".agent" / "constraints.md").write_text("# Hard constraints\n\n- Never drop the users table.\n- Keep API v2.\n")
    (root / "src" / "api").mkdir(parents=True)
    (root / "src" / "api" / "a.py").write_text("x = 1\ny = 2\n")
    units = root / "units"
    units.mkdir()
    (units / "api.toml").write_text('[agent]\ncommand = ["x"]\n[scope]\npaths = ["src/api/**"]\n')
    add_fact(root, "api", "x starts at one", "src/api/a.py:1")
    add_fact(root, "api", "y is two", "src/api/a.py:2")
    (root / "src" / "api" / "a.py").write_text("x = 1\ny = 3\n")  # the second fact's line changed: stale
    adapter = make(tmp_path)
    adapter.launch("W", "s1", {})
    s = session()
    prompt = {"hook_event_name": "UserPromptSubmit", "prompt": "go"}
    meanings = adapter.on_agent_event(s, prompt)
    answer = json.loads(adapter.hook_output(prompt, meanings, None) or "")["hookSpecificOutput"]
    assert answer["hookEventName"] == "UserPromptSubmit"
    assert "2 hard constraints" in answer["additionalContext"] and "Never drop the users table." in answer["additionalContext"]
    write = {"hook_event_name": "PreToolUse", "tool_name": "Write", "cwd": str(root),
             "tool_input": {"file_path": str(root / "src" / "api" / "b.py"), "content": "z"}}
    facts = json.loads(adapter.hook_output(write, adapter.on_agent_event(s, write), None) or "")["hookSpecificOutput"]
    text = facts["additionalContext"]
    assert facts["hookEventName"] == "PreToolUse" and "module api" in text and "x starts at one" in text
    assert "[STALE" in text.split("y is two")[0].splitlines()[-1]
    assert adapter.hook_output(write, [], None) is None  # once per session per module
    other = {**write, "tool_input": {"file_path": str(root / "README.md"), "content": "z"}}
    assert adapter.hook_output(other, [], None) is None  # outside every module
    # after a compaction the facts come again
    adapter.on_agent_event(s, {"hook_event_name": "SessionStart", "source": "compact"})
    assert "x starts at one" in (adapter.hook_output(write, [], None) or "")


def test_the_window_comes_from_the_status_line_and_a_disagreeing_unit_window_warns(tmp_path: Path) -> None:
    adapter = make(tmp_path, extra="[context]\nwindow = 1000000\n")
    launch = adapter.launch("W", "s1", {})
    s = session()
    figure = adapter.context(s)
    assert (figure.window, figure.window_source.value, figure.window_warning) == (1_000_000, "unit", None)
    status = Path(launch.argv[launch.argv.index("--settings") + 1]).parent / "statusline" / "statusline.json"
    status.write_text(json.dumps({"context_window": {"context_window_size": 200000, "used_percentage": 3}}))
    figure = adapter.context(s)
    assert figure.window == 200_000 and figure.window_source.value == "agent"
    assert "1000000" in (figure.window_warning or "") and "200000" in (figure.window_warning or "")
    assert figure.as_dict()["window_source"] == "agent"
    quiet = make(tmp_path)  # no [context] window: the default, and no warning
    quiet.launch("W", "s2", {})
    assert quiet.context(session("s2")).window_source.value == "default"


def test_a_smaller_unit_window_wins_over_the_status_lines_and_claudes_compaction_goes_above_hard_limit(
        tmp_path: Path) -> None:
    """Issue 26 §1: behind a custom base URL Claude Code says 1,000,000; the unit's 200,000 is used, with a
    warning, and Claude Code's own auto-compact window puts its compaction at 92 % of 200,000 (184,000 tokens:
    its window less 33,000), above hard_limit."""
    adapter = make(tmp_path, extra="[context]\nwindow = 200000\n")
    launch = adapter.launch("W", "s1", {})
    assert launch.env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == str(184_000 + 33_000)
    status = Path(launch.argv[launch.argv.index("--settings") + 1]).parent / "statusline" / "statusline.json"
    status.write_text(json.dumps({"context_window": {"context_window_size": 1_000_000}}))
    figure = adapter.context(session())
    assert (figure.window, figure.window_source.value) == (200_000, "unit")
    assert "uses the smaller, 200000" in (figure.window_warning or "") and "1000000" in figure.window_warning
    # a higher hard_limit moves it up; a small window never asks less than Claude Code accepts (100k)
    high = make(tmp_path, extra="[context]\nwindow = 200000\nhard_limit = 0.95\n").launch("W", "s2", {})
    assert high.env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == str(192_000 + 33_000)
    tiny = make(tmp_path, extra="[context]\nwindow = 50000\n").launch("W", "s3", {})
    assert tiny.env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == "100000"  # compacts at 67,000: still above 45,000
    # no unit window (Claude Code's own is used), or a choice of the person's: left alone
    assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW" not in make(tmp_path).launch("W", "s4", {}).env
    for _extra, env, command in (("", {"DISABLE_AUTO_COMPACT": "1"}, None), ("", {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "300000"}, None),
                                ("", None, ["/opt/claude", "--autocompact", "500k"])):
        unit = make(tmp_path, env=env, command=command, extra="[context]\nwindow = 200000\n")
        assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW" not in unit.launch("W", "s5", {}).env, (env, command)  # the unit's own
    inherited = make(tmp_path, extra="[context]\nwindow = 200000\n").launch("W", "s6", {"DISABLE_COMPACT": "1"})
    assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW" not in inherited.env


def test_the_tokens_used_come_from_the_freshest_of_the_transcript_and_the_status_line(tmp_path: Path) -> None:
    """Issue 26 §1: the status line said 20,000 while the transcript's last usage said 150,000: the newer wins."""
    adapter = make(tmp_path, extra="[context]\nwindow = 200000\n")
    launch = adapter.launch("W", "s1", {})
    claude_id = launch.argv[launch.argv.index("--session-id") + 1]
    status = Path(launch.argv[launch.argv.index("--settings") + 1]).parent / "statusline" / "statusline.json"
    transcript = Path(launch.env["CLAUDE_CONFIG_DIR"]) / "projects" / project_dir_name(tmp_path.resolve()) / f"{claude_id}.jsonl"
    transcript.parent.mkdir(parents=True)

    def draw(used: int, at: float, session: str = claude_id) -> None:
        status.write_text(json.dumps({"session_id": session, "context_window": {
            "context_window_size": 1_000_000, "current_usage": {"input_tokens": used, "cache_read_input_tokens": 0}}}))
        os.utime(status, (at, at))

    def reply(used: int, at: str) -> None:
        with open(transcript, "a") as f:
            f.write(_assistant(used, timestamp=at))

    draw(20_000, 1_800_000_000.0)  # 2027-01-15T08:00:00Z
    reply(150_000, "2027-01-15T08:00:05.000Z")
    figure = adapter.context(session())
    assert (figure.used, figure.ratio, figure.source) == (150_000, 0.75, "claude transcript")
    draw(30_000, 1_800_000_010.0)  # a newer status line (the transcript not yet written)
    assert (adapter.context(session()).used, adapter.context(session()).source) == (30_000, "claude status line")
    reply(40_000, "2027-01-15T08:00:10.000Z")  # the same moment: the transcript's
    assert adapter.context(session()).used == 40_000
    draw(99_000, 1_800_000_020.0, session="another-conversation")  # the status line of a conversation left by /clear
    assert adapter.context(session()).used == 40_000


def test_a_permission_dialog_on_screen_is_reported_as_blocked(tmp_path: Path) -> None:
    from supervisor.adapters import screens

    adapter = make(tmp_path)
    adapter.launch("W", "s1", {})
    s = session()
    watcher = adapter.watcher(s)
    watcher.feed(b"\x1b[2J\x1b[HBash command\r\n  rm -rf build\r\nDo you want to proceed?\r\n\xe2\x9d\xaf 1. Yes\r\n  2. No\r\n")
    probe = adapter._runs["s1"].probe
    assert probe is not None
    probe.last_output_at -= screens.QUIET  # output went quiet
    blocked = adapter.blocked(s)
    assert blocked is not None and blocked.kind.value == "approval" and blocked.answer is None
    assert "attach" in blocked.todo


def test_encode_and_quit(tmp_path: Path) -> None:
    adapter = make(tmp_path)
    assert adapter.encode("hello").steps == ((b"hello", 0.3), (b"\r", 0.0))
    assert adapter.encode("a\nb").steps[0][0] == BRACKETED_PASTE_START + b"a\nb" + BRACKETED_PASTE_END
    assert adapter.quit().payload() == b"/exit\r"


def test_hook_meanings_and_the_wakeup_answer(tmp_path: Path) -> None:
    adapter = make(tmp_path)
    adapter.launch("W", "s1", {})
    s = session()
    watcher = adapter.watcher(s)
    assert watcher.state == Turn.BUSY  # the kickoff turn is running
    assert adapter.on_agent_event(s, {"hook_event_name": "SessionStart", "source": "startup"}) == []
    assert adapter.on_agent_event(s, {"hook_event_name": "Stop"}) == ["turn_end"]
    watcher.turn_ended()
    assert adapter.on_agent_event(s, {"hook_event_name": "UserPromptSubmit", "prompt": "x"}) == ["turn_began"]
    assert watcher.state == Turn.BUSY  # a person typed in an attached terminal
    # typed /compact: no checkpoint, the wakeup afterwards, and that ends the "turn"
    assert adapter.on_agent_event(s, {"hook_event_name": "PreCompact", "trigger": "manual"}) == []
    compacted = {"hook_event_name": "SessionStart", "source": "compact"}
    assert adapter.on_agent_event(s, compacted) == ["compacted", "turn_end"]
    answer = json.loads(adapter.hook_output(compacted, ["compacted", "turn_end"], "THE WAKEUP") or "")
    assert answer == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "THE WAKEUP"}}
    # automatic compaction: checkpoint if there is time; it happens inside a turn
    assert adapter.on_agent_event(s, {"hook_event_name": "PreCompact", "trigger": "auto"}) == ["pre_compact"]
    assert adapter.on_agent_event(s, compacted) == ["compacted", "own_compaction"]
    assert adapter.hook_output({"hook_event_name": "Stop"}, ["turn_end"], None) is None
    assert adapter.on_agent_event(session("other"), {"hook_event_name": "Stop"}) == []


def _entry(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, **fields}) + "\n"


def _assistant(inp: int, create: int = 0, read: int = 0, **extra: Any) -> str:
    usage = {"input_tokens": inp, "cache_creation_input_tokens": create, "cache_read_input_tokens": read, "output_tokens": 5}
    return _entry("assistant", message={"model": "m", "usage": usage}, **extra)


def test_context_from_the_transcript_incrementally(tmp_path: Path) -> None:
    adapter = make(tmp_path, extra="[context]\nwindow = 1000\n")
    launch = adapter.launch("W", "s1", {})
    s = session()
    assert adapter.context(s).used == 0 and not adapter.context(s).exact
    claude_id = launch.argv[launch.argv.index("--session-id") + 1]
    path = Path(launch.env["CLAUDE_CONFIG_DIR"]) / "projects" / project_dir_name(tmp_path.resolve()) / f"{claude_id}.jsonl"
    path.parent.mkdir(parents=True)
    with open(path, "w") as f:
        f.write(_entry("user", message={"content": "hi"}) + _assistant(100, 20, 300))
        f.write(_assistant(999_999, isSidechain=True))  # a subagent's turn does not count
        f.write(_entry("assistant", message={"model": "<synthetic>", "usage": {"input_tokens": 0}}))
    figure = adapter.context(s)
    assert (figure.used, figure.window, figure.exact) == (420, 1000, True)
    with open(path, "a") as f:
        f.write(_assistant(500)[:-10])  # torn: waits for its end
    assert adapter.context(s).used == 420
    with open(path, "a") as f:
        f.write(_assistant(500)[-10:])
        f.write(_entry("system", subtype="compact_boundary", compactMetadata={"preTokens": 500, "postTokens": 80}))
    figure = adapter.context(s)
    assert figure.used == 80 and "compaction" in figure.source
    # /clear: the hook names a new transcript, which is followed from its start
    other = path.with_name("new-id.jsonl")
    other.write_text(_assistant(7))
    adapter.on_agent_event(s, {"hook_event_name": "SessionStart", "source": "clear", "session_id": "new-id",
                               "transcript_path": str(other)})
    assert adapter.context(s).used == 7


def test_meter_reads_only_what_was_appended(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(_assistant(1) * 1000)
    meter = TranscriptMeter(path)
    assert meter.read() == 1
    size = path.stat().st_size
    assert meter.offset == size
    with open(path, "a") as f:
        f.write(_assistant(2))
    assert meter.read() == 2 and meter.offset == path.stat().st_size


def test_project_dir_name() -> None:
    assert project_dir_name(Path("/tmp/a.b/c_d")) == "-tmp-a-b-c-d"
