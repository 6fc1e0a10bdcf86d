"""The trail parsers, pure: canned records of the real CLIs (tests/data, recorded with Codex 0.169.0 and
Claude Code 2.1.328 against the fake model servers playing tests/trail_scenario.py), and edge cases."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from supervisor.trail.claude import parse_transcript, read_transcript
from supervisor.trail.codex import parse_rollout, read_rollout
from supervisor.trail.common import norm_path, output_tail, patch_files, reads_of_command
from supervisor.trail.generic import after_echo, screen_trail
from supervisor.trail.model import Action, Kind, PlanStep, StepStatus, Trail
from tests import trail_scenario as ts

DATA = Path(__file__).parent / "data"
ROOT = "/work/proj"


def test_codex_rollout_gives_the_ask_plan_reads_edit_and_the_failing_command() -> None:
    trail = read_rollout(DATA / "codex_rollout_trail.jsonl", ROOT)
    assert trail.session == "01a2320e-ed13-7e53-9ac4-74dda8630c94" and trail.cwd == ROOT
    assert trail.asks == [ts.ASK]  # Codex's own <environment_context> message is not an ask
    assert [(s.text, s.status.value) for s in trail.plan] == list(ts.PLAN_SECOND)
    assert trail.files_read() == list(ts.READS)
    assert trail.files_changed() == [ts.EDIT]
    [failing] = trail.commands()
    assert failing.command == ts.TEST_COMMAND and failing.exit_code == 1 and failing.ok is False
    assert "IndentationError" in failing.output
    # every tool call, in order, for the fragmentation report
    assert [(a.kind, a.tool) for a in trail.actions] == [
        (Kind.READ, "exec_command"), (Kind.READ, "exec_command"), (Kind.PLAN, "update_plan"),
        (Kind.COMMAND, "exec_command"), (Kind.EDIT, "apply_patch"), (Kind.PLAN, "update_plan")]
    assert all(a.at for a in trail.actions) and trail.actions[0].output == ""  # a read's output is the file: not kept


def test_codex_without_completion_events_falls_back_to_the_tool_outputs() -> None:
    lines = [json.dumps(x) for x in (
        {"type": "session_meta", "payload": {"id": "t1", "cwd": "/p/sub"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<environment_context>\n<cwd>/p</cwd></environment_context>"}]}},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "fix it"}]}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "call_id": "c1",
                                              "arguments": json.dumps({"cmd": "sed -n 1,20p ../a.py"})}},
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1",
                                              "output": "Process exited with code 0\nOutput:\nsecret file body\n"}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "shell", "call_id": "c2",
                                              "arguments": json.dumps({"command": ["bash", "-lc", "make test"]})}},
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c2",
                                              "output": "Exit code: 2\nWall time: 1s\nOutput:\nFAILED x\n"}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "create_goal", "call_id": "g1",
                                              "arguments": json.dumps({"objective": "ship the parser"})}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "update_goal", "call_id": "g2",
                                              "arguments": json.dumps({"status": "blocked"})}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "call_id": "c3",
                                              "arguments": json.dumps({"cmd": "apply_patch <<'EOF'\n*** Begin Patch\n"
                                                                              "*** Add File: b.py\n+x\n*** End Patch\nEOF"})}},
    )]
    trail = parse_rollout([*lines, '{"type": "response_item", "payload": {"type": "func'], "/p")  # torn last line
    assert trail.asks == ["fix it"] and trail.cwd == "/p/sub"
    assert trail.files_read() == ["a.py"] and trail.actions[0].output == ""
    [make] = trail.commands()
    assert (make.command, make.exit_code, make.ok, make.output) == ("make test", 2, False, "FAILED x")
    assert trail.files_changed() == ["sub/b.py"]
    assert (trail.goal, trail.goal_status) == ("ship the parser", "blocked")


def test_claude_transcript_gives_the_ask_todos_reads_edit_and_exit_status() -> None:
    trail = read_transcript(DATA / "claude_transcript_trail.jsonl", ROOT)
    assert trail.asks == [ts.ASK] and trail.cwd == ROOT
    assert [(s.text, s.status.value) for s in trail.plan] == list(ts.PLAN_SECOND)
    assert trail.files_read() == list(ts.READS) and trail.files_changed() == [ts.EDIT]
    [failing] = trail.commands()
    assert (failing.command, failing.exit_code, failing.output) == (ts.TEST_COMMAND, ts.TEST_EXIT,
                                                                     "FAIL: empty input does not parse")
    assert [a.tool for a in trail.actions] == ["Read", "Read", "TodoWrite", "Bash", "Edit", "TodoWrite"]


def _entry(kind: str, content, **extra) -> str:
    return json.dumps({"type": kind, "sessionId": "c1", "cwd": "/p", "message": {"role": kind, "content": content}, **extra})


def test_claude_task_tools_build_the_plan_and_sidechains_and_reminders_are_not_the_session() -> None:
    lines = [
        _entry("user", "do the thing"),
        _entry("user", [{"type": "text", "text": "<system-reminder>ignore me</system-reminder>"}]),
        _entry("user", "<command-name>/compact</command-name>"),
        _entry("user", "summary of the conversation so far", isCompactSummary=True),
        _entry("assistant", [{"type": "tool_use", "id": "t1", "name": "TaskCreate", "input": {"subject": "Write it"}},
                             {"type": "tool_use", "id": "t2", "name": "TaskCreate", "input": {"subject": "Test it"}}]),
        _entry("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "Task #1 created successfully: Write it"},
                        {"type": "tool_result", "tool_use_id": "t2", "content": "Task #2 created successfully: Test it"}]),
        _entry("assistant", [{"type": "tool_use", "id": "t3", "name": "TaskUpdate", "input": {"taskId": "1", "status": "completed"}},
                             {"type": "tool_use", "id": "t4", "name": "Bash", "input": {"command": "cat /p/x.txt"}}]),
        _entry("user", [{"type": "tool_result", "tool_use_id": "t4", "content": "hello"}],
               toolUseResult={"stdout": "hello", "stderr": ""}),
        _entry("assistant", [{"type": "tool_use", "id": "s1", "name": "Write", "input": {"file_path": "/p/side.py"}}],
               isSidechain=True),
        _entry("assistant", [{"type": "tool_use", "id": "t5", "name": "Write", "input": {"file_path": "/elsewhere/y.py"}}]),
        _entry("user", [{"type": "tool_result", "tool_use_id": "t5", "content": "denied", "is_error": True}]),
        "not json at all",
    ]
    trail = parse_transcript(lines, "/p")
    assert trail.asks == ["do the thing"]
    assert trail.plan == [PlanStep("Write it", StepStatus.COMPLETED), PlanStep("Test it", StepStatus.PENDING)]
    assert trail.files_read() == ["x.txt"] and trail.actions[-2].exit_code == 0
    assert trail.files_changed() == []  # the side chain is not this session's; the failed Write changed nothing
    assert [a.edits for a in trail.actions if a.kind is Kind.EDIT] == [("/elsewhere/y.py",)]


def test_generic_screen_keeps_the_last_lines_and_the_commands_it_saw() -> None:
    text = ("fake> write src/a.py x\nwrote src/a.py\nfake> run python3 -c 1/0\n$ python3 -c 1/0\n"
            "Traceback (most recent call last):\nZeroDivisionError: division by zero\n[exit 1]\n"
            "fake> run true\n$ true\n[exit 0]\nfake> ")
    trail = screen_trail(text, prompt=re.compile("fake> $"))
    assert [(a.command, a.exit_code, a.ok) for a in trail.actions] == [("python3 -c 1/0", 1, False), ("true", 0, True)]
    assert trail.actions[0].output.endswith("ZeroDivisionError: division by zero")
    assert trail.screen[-1] == "[exit 0]" and "fake>" not in trail.screen[-1]
    assert len(screen_trail("\n".join(f"line {i}" for i in range(50)), lines=5).screen) == 5


@pytest.mark.parametrize(("command", "reads"), [
    ("cat a.py b.py", ("a.py", "b.py")),
    ("sed -n '1,40p' src/x.py", ("src/x.py",)),
    ("sed -n -e 5p f", ("f",)),
    ("head -n 20 README.md", ("README.md",)),
    ("sed -i s/a/b/ f", None),  # edits
    ("sed s/a/b/ f", None),  # prints everything: not counted as a read
    ("cat a | grep x", None),
    ("pytest -q", None),
    ("cat 'unterminated", None),
])
def test_reads_of_simple_commands(command: str, reads: tuple[str, ...] | None) -> None:
    assert reads_of_command(command) == reads


def test_paths_patches_and_output_tails() -> None:
    assert norm_path("src/a.py", "/p", "/p") == "src/a.py"
    assert norm_path("/p/sub/../b.py", None, "/p") == "b.py"
    assert norm_path("file:///p/c.py", "/p", "/p") == "c.py"
    assert norm_path("../out.txt", "/p", "/p") == "/out.txt"
    patch = "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n@@\n*** Delete File: c.py\n*** Add File: a.py\n*** End Patch"
    assert patch_files(patch) == ("a.py", "b.py", "c.py")
    assert output_tail("a\n\nb\nc\n", limit=3) == "b\nc"
    assert output_tail("x" * 500, limit=10) == "…" + "x" * 9


def test_a_trail_round_trips_through_json_and_maps_every_agent_text() -> None:
    trail = Trail("src", "s", "/p", ["ask TOKEN"], [PlanStep("step TOKEN", StepStatus.IN_PROGRESS)],
                  [Action(Kind.COMMAND, "Bash", command="echo TOKEN", exit_code=0, ok=True, output="TOKEN",
                          reads=("a",), edits=("b",), at="t", call_id="c")], ["screen TOKEN"], ["note"],
                  goal="goal TOKEN", goal_status="active")
    assert Trail.from_dict(json.loads(json.dumps(trail.as_dict()))) == trail
    masked = trail.mapped(lambda t: t.replace("TOKEN", "***"))
    assert "TOKEN" not in json.dumps(masked.as_dict()) and "TOKEN" in json.dumps(trail.as_dict())
    assert trail.last_ask(lambda t: t.startswith("ask")) is None and trail.last_ask() == "ask TOKEN"


def test_generic_screen_skips_the_commands_quoted_in_the_echoed_wakeup() -> None:
    wakeup = "# Wakeup\n\n## Recent summary\n$ cat old.txt\n[exit 0]\n\nGo on with the task.\n"
    screen = "fake> " + wakeup.replace("\n", "\r\n") + "fake> run true\n$ true\n[exit 0]\nfake> "
    trail = screen_trail(after_echo(screen, wakeup), prompt=re.compile("fake> $"))
    assert [a.command for a in trail.actions] == ["true"]
    assert [a.command for a in screen_trail(screen, prompt=re.compile("fake> $")).actions] == ["cat old.txt", "true"]
    assert after_echo(screen, None) == screen and after_echo(screen, "never typed") == screen


def test_codex_token_counts_price_each_tool_call_with_the_threads_tokens_after_its_response() -> None:
    def call(cid: str, cmd: str) -> str:
        return json.dumps({"type": "response_item", "payload": {"type": "function_call", "name": "exec_command",
                                                                "call_id": cid, "arguments": json.dumps({"cmd": cmd})}})

    def count(total: dict) -> str:
        return json.dumps({"type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": total, "last_token_usage": {"total_tokens": 1}}}})

    lines = [count({"input_tokens": 900, "output_tokens": 7, "total_tokens": 907}),  # the wakeup's answer: no call
             call("c1", "cat a.py"), call("c2", "make"), count({"input_tokens": 1900, "output_tokens": 14}),
             call("c3", "make again"), count({"total_tokens": 3021}), call("c4", "never priced")]
    trail = parse_rollout(lines, "/p")
    assert [a.tokens for a in trail.actions] == [1914, 1914, 3021, None]
    assert Action.from_dict(trail.actions[0].as_dict()).tokens == 1914 and "tokens" not in trail.actions[3].as_dict()


def test_claude_usage_adds_up_each_response_once_though_every_content_block_repeats_it() -> None:
    def said(mid: str, blocks: list, usage: dict | None, **extra) -> str:
        return json.dumps({"type": "assistant", "sessionId": "c1", "cwd": "/p", **extra,
                           "message": {"id": mid, "role": "assistant", "content": blocks,
                                       **({"usage": usage} if usage else {})}})

    u1 = {"input_tokens": 3, "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 0, "output_tokens": 1}
    u1_final = dict(u1, output_tokens=20)
    u2 = {"input_tokens": 5, "cache_creation_input_tokens": 10, "cache_read_input_tokens": 1000, "output_tokens": 9}
    lines = [_entry("user", "go"),
             said("m1", [{"type": "text", "text": "reading"}], u1),
             said("m1", [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/p/a.py"}}], u1_final),
             said("s1", [{"type": "tool_use", "id": "x", "name": "Read", "input": {"file_path": "/p/b.py"}}],
                  {"input_tokens": 99999, "output_tokens": 1}, isSidechain=True),
             said("m2", [{"type": "tool_use", "id": "t2", "name": "Edit", "input": {"file_path": "/p/a.py"}},
                         {"type": "tool_use", "id": "t3", "name": "Bash", "input": {"command": "make"}}], u2),
             said("m3", [{"type": "tool_use", "id": "t4", "name": "Bash", "input": {"command": "ls"}}], None)]
    trail = parse_transcript(lines, "/p")
    assert [a.tokens for a in trail.actions] == [1023, 2047, 2047, None]
