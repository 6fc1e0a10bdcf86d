"""Secrets never reach disk, the wakeup, or the model: 19 planted secrets, the real daemon, a real agent.

The agent (``leaky_agent.py``: the fake agent plus a ``leak FILE`` command)
prints 19 secrets the way agents do: whole, in pieces 0.11 s and 1 s apart,
with colour codes inside, with cursor moves inside.  Then a checkpoint the
agent ignores makes agentd write the recent summary and an ``[auto]`` line
from the transcript, and a fresh session starts from the wakeup.  No piece of
any secret may then be found in the ``.txt``, the ``.log``, ``agentd.log``,
``.agent/`` (recent summary, engram), the wakeup (``agentd wakeup`` and what
the new session was typed), the history, or what a viewer attached without
``--raw`` saw.  Each artifact must also show ``[REDACTED]``: the secrets did
reach it, redacted.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pexpect
import pytest

from supervisor.control import attach as proto
from supervisor.session.cleantext import project as strip_escapes
from tests.conftest import Project, clean_env, wait_until

AGENT = Path(__file__).with_name("leaky_agent.py")
TIMEOUT = 60

#: Values the unit's environment holds (names the redactor treats as secret).
ENV = {
    "STRIPE_SECRET": "rk9f8e7d6c5b4a3210fedcbaZ",
    "DEPLOY_PASSWORD": "correct horse battery staple",
    "SIGNING_KEY": "k3yMaterial7781zzqWq",
    "GCP_CREDENTIALS": "gcpcredblob55aa66bb77cc",
}
AWS_SECRET = "9xQ2vB7nM4kL8pT1wR5zY3hJ6dF0sGaE2cV4b/Nm"
PEM_BODY = [
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
    "QyNTUxOQAAACDpZmFrZWtleWZvcnRlc3Rpbmdvbmx5YWdlbnRkc2VjcmV0cwAAAJhmYW",
    "tlZmFrZWZha2VmYWtlZmFrZWZha2VmYWtlZmFrZWZha2VmYWtlZmFrZWZha2VmYWtlZm",
]

#: name -> (the secret, the steps that print it).  The secret is what must never be found.
PLANTED: dict[str, tuple[str, list[dict]]] = {}


def plant(name: str, secret: str, *steps: str | float) -> None:
    out: list[dict] = [{"out": f"[{name}] "}]
    out += [{"sleep": s} if isinstance(s, float) else {"out": s} for s in steps]
    out.append({"out": "\n"})
    PLANTED[name] = (secret, out)


def whole(name: str, text: str, secret: str | None = None) -> None:
    plant(name, secret or text, text)


whole("openai", "sk-proj-Q7vB2mX9kL4pT8wR1nZ6yH3jF5dS0aGcE")
plant("anthropic-0.11s", "sk-ant-api03-Xr8Kp2Lm9Qw4Tz7Vb1Nc6Hd3Js5Fg0Ay-_AbCd",
      "sk-ant-api03-Xr8Kp2", 0.11, "Lm9Qw4Tz7Vb1Nc6Hd3Js5Fg0Ay-_AbCd")
plant("github-1s", "ghp_R4nD0mT0k3nV4lu3F0rT3st1ngXyZ9876543", "ghp_R4nD0m", 1.0, "T0k3nV4lu3F0rT3st1ngXyZ9876543")
plant("github-pat-ansi", "github_pat_11ABCDEFG0a1b2c3d4e5f6_g7h8i9j0k1l2m3n4o5p6q7r8s9t0",
      "\x1b[32mgithub_pat_11ABC\x1b[1m", "DEFG0a1b2c3d4e5f6_g7h8i9j0\x1b[0m\x1b[36m", "k1l2m3n4o5p6q7r8s9t0\x1b[0m")
plant("aws-key-id-cursor", "AKIAZ7Q3RTXW5YV2NB4M", "AKIAZ7Q3", "\x1b[1C\x1b[1D", "RTXW5YV2NB4M")
whole("aws-secret", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET)
plant("slack-0.11s", "xoxb-2417883721-5934823198421-Ws9Tq4Lm2Xv8Kd1Rb6Np3Zc",
      "xoxb-2417883721-59", 0.11, "34823198421-Ws9Tq4Lm2Xv8Kd1Rb6Np3Zc")
plant("jwt-ansi", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhZ2VudGQtdGVzdCIsImlhdCI6MTcwMDAwMDAwMH0."
      "Qm9ndXNTaWduYXR1cmVGb3JUZXN0aW5n",
      "\x1b[33meyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.\x1b[0m\x1b[35meyJzdWIiOiJhZ2VudGQtdGVzdCIsImlh",
      "\x1b[0mdCI6MTcwMDAwMDAwMH0.Qm9ndXNTaWduYXR1cmVGb3JUZXN0aW5n")
plant("pem-1s", "\n".join(PEM_BODY),
      "\n-----BEGIN OPENSSH PRIVATE KEY-----\n" + PEM_BODY[0] + "\n" + PEM_BODY[1][:30], 1.0,
      PEM_BODY[1][30:] + "\n" + PEM_BODY[2] + "\n-----END OPENSSH PRIVATE KEY-----")
plant("url-0.11s", "Pa55w0rdS3cr3tXq", "postgres://app_user:Pa55w0", 0.11, "rdS3cr3tXq@db.internal:5432/app")
plant("google-cursor", "AIzaSyD4x9Kq2Lm7Vb3Nc8Hd1Js6Fg0Ay5Tz2Wr", "AIzaSyD4x9Kq2L", "\x1b[1A\x1b[1B",
      "m7Vb3Nc8Hd1Js6Fg0Ay5Tz2Wr")
whole("env-secret", ENV["STRIPE_SECRET"])
plant("env-password-0.11s", ENV["DEPLOY_PASSWORD"], "correct horse", 0.11, " battery staple")
whole("env-key", ENV["SIGNING_KEY"])
whole("env-credentials", ENV["GCP_CREDENTIALS"])
whole("password=", "db_password=Tr0ub4dorQq88x", "Tr0ub4dorQq88x")
whole("secret:", "client_secret: mZ0q9LrWk2vXy7Pd", "mZ0q9LrWk2vXy7Pd")
whole("token=", "refresh_token=c0ffeeD00dF00dBeef42", "c0ffeeD00dF00dBeef42")
whole("bearer", "Authorization: Bearer 7Fq2Lm9Xv4Kd8Rb1Np6Zc3Hw5Ty0Ju", "7Fq2Lm9Xv4Kd8Rb1Np6Zc3Hw5Ty0Ju")

DONE = "LEAK-DONE"


def pieces(secret: str, size: int = 8) -> list[str]:
    """Every ``size``-character window of each line of the secret: none may be found anywhere."""
    out = []
    for line in secret.splitlines() or [secret]:
        line = line.strip()
        out += [line[i:i + size] for i in range(0, max(1, len(line) - size + 1))]
    return out


def leaks(text: str) -> dict[str, list[str]]:
    """Secrets (name -> pieces) found in ``text`` or in it with escape sequences removed."""
    views = (text, strip_escapes(text.encode("utf-8", "surrogateescape")).decode("utf-8", "replace"))
    found: dict[str, list[str]] = {}
    for name, (secret, _) in PLANTED.items():
        hits = [p for p in pieces(secret) if any(p in view for view in views)]
        if hits:
            found[name] = hits[:3]
    return found


def test_the_plant_has_nineteen_secrets_of_the_issues_shapes() -> None:
    assert len(PLANTED) == 19
    assert len(AWS_SECRET) == 40
    timed = [name for name, (_, steps) in PLANTED.items() if any("sleep" in s for s in steps)]
    assert {0.11, 1.0} <= {s["sleep"] for _, steps in PLANTED.values() for s in steps if "sleep" in s}
    assert len(timed) >= 5
    # the check itself finds a secret that is there, split by escapes or not
    assert leaks("x " + PLANTED["openai"][0] + " y") == {"openai": pieces(PLANTED["openai"][0])[:3]}
    assert "github-pat-ansi" in leaks("".join(s.get("out", "") for s in PLANTED["github-pat-ansi"][1]))


@pytest.fixture
def viewer_log() -> io.BytesIO:
    return io.BytesIO()


def test_nineteen_planted_secrets_leak_nowhere(project: Project, tmp_path: Path, viewer_log: io.BytesIO) -> None:
    steps = [step for _, s in PLANTED.values() for step in s] + [{"out": DONE + "\n"}]
    leak_file = tmp_path / "leak.json"
    leak_file.write_text(json.dumps(steps))
    inputs = project.root / "inputs.jsonl"
    project.agentd("init")
    argv = json.dumps([sys.executable, str(AGENT), "--on-checkpoint", "ignore", "--input-log", str(inputs)])
    env = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in ENV.items()) + " }"
    project.unit("leaky", f"""
        [agent]
        command = {argv}
        prompt = "fake> $"
        env = {env}
        [restart]
        stop_timeout = 3
        [checkpoint]
        grace = 2
        """)
    project.agentd("start")
    project.wait_state("leaky", "running")
    wait_until(lambda: inputs.exists() and project.unit_status("leaky")["turn"] == "idle", TIMEOUT,
               what="the first session to take its wakeup")

    viewer = pexpect.spawn(sys.executable, ["-m", "supervisor", "--root", str(project.root), "attach", "leaky",
                                            "--read-only"],
                           cwd=str(project.root), env=clean_env(), dimensions=(40, 120), timeout=TIMEOUT)
    try:
        viewer.logfile_read = viewer_log
        viewer.expect(r"\[agentd\] attached to leaky")
        project.agentd("send", "leaky", f"leak {leak_file}")
        viewer.expect(DONE)
        wait_until(lambda: DONE in project.transcript("leaky"), TIMEOUT, what="the leak to reach the transcript")
        viewer.send(proto.DETACH_KEY)
        viewer.expect(pexpect.EOF)
    finally:
        viewer.close(force=True)

    first = project.unit_status("leaky")["session"]
    assert "auto" in project.agentd("checkpoint", "leaky").stdout
    wait_until(lambda: (r := project.unit_status("leaky"))["session"] != first and r["turn"] == "idle", TIMEOUT,
               what="the fresh session to take its wakeup")
    wakeup = project.agentd("wakeup", "leaky").stdout
    project.agentd("stop", "--now")

    transcripts = project.state / "transcripts" / "leaky"
    agent_dir = project.root / ".agent"
    typed = [json.loads(line)["text"] for line in inputs.read_text().splitlines()]
    artifacts = {
        "viewer (attach)": viewer_log.getvalue().decode("utf-8", "replace"),
        "agentd.log": (project.state / "agentd.log").read_text(errors="replace"),
        "recent-summary.md": (agent_dir / "recent-summary.md").read_text(),
        "engram.md": (agent_dir / "engram.md").read_text(),
        "agentd wakeup": wakeup,
        "typed into the agent": "\n".join(typed),
        "agentd history": project.agentd("history", "leaky", "--json").stdout,
        "history file": (project.state / "history" / "leaky.jsonl").read_text(),
        "agentd logs": project.agentd("logs", "leaky", "-n", "400").stdout,
    }
    for path in sorted(transcripts.iterdir()):
        artifacts[path.name] = path.read_text(errors="replace")
    for path in sorted(agent_dir.rglob("*")):
        if path.is_file():
            artifacts[f".agent/{path.relative_to(agent_dir)}"] = path.read_text(errors="replace")

    found = {name: hit for name, text in artifacts.items() if (hit := leaks(text))}
    assert found == {}, f"secrets found: {found}"
    # the secrets did reach each place that carries agent output, as [REDACTED]
    first_txt = artifacts[f"{first}.txt"]
    for name in ("viewer (attach)", f"{first}.txt", f"{first}.log", "recent-summary.md", "agentd wakeup",
                 "typed into the agent"):
        assert artifacts[name].count("[REDACTED]") >= 10, (name, artifacts[name][-3000:])
    assert first_txt.count("[REDACTED]") >= 19
    assert typed.count(wakeup) == 1 and typed[-1] == wakeup  # the fresh session's first message
    cycles = [json.loads(line) for line in artifacts["agentd history"].splitlines()]
    assert "[auto]" in artifacts["engram.md"] and [c for c in cycles if c["trigger"] == "command"][-1]["flush"] == "auto"
    # doctor sees no secret shape under .agent/
    assert "looks like a secret" not in project.agentd("doctor", check=False).stdout
