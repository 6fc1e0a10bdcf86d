"""The shapes issue 25 §5 found redacted nowhere, wrapped and boxed keys, and a file named after a token.

A real daemon runs the leaky agent (``leaky_agent.py``) in a git project at a
terminal 80 columns wide.  It prints a Stripe secret and restricted key, an npm
token, a Hugging Face token, an Azure storage connection string, an
environment secret of exactly 8 characters, a key wrapped at the terminal's
width (the rest on the next line, 0.11 s later), a key drawn over two rows of a
box, and a PEM block inside a ``│ `` gutter (its second half a second later).
Then it writes a file in its scope whose *name* is a Stripe key, a checkpoint
it ignores saves that file in a WIP commit, and a fresh session starts from
the wakeup.  No piece of any secret may be found in the transcripts, ``agentd
logs``, what an attached viewer saw, ``agentd.log``, the history, ``.agent/``
(the recent summary ``sync`` pushes, the engram, where it stopped), the wakeup
and what the new session was typed, the WIP commit's message, or the event
index (``events.db`` and ``recall --events``).

The pure test below checks the same plants, in the same places' form (the
stream, in pieces, and whole), against the one-pass matcher alone.
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
from supervisor.session.redact import Redactor
from tests.conftest import Project, clean_env, git, wait_until

AGENT = Path(__file__).with_name("leaky_agent.py")
TIMEOUT = 60
COLS = 80
BOX = "│"

ENV = {"DEPLOY_TOKEN": "Xq7#Lm2p"}  # exactly 8 characters: the README promises 8+
STRIPE_LIVE = "sk_live_51H8aQ2eZvKYlo2C7xQ9mN4pR6sT8uV0wX2yZ4aB6cD8eFgH"
STRIPE_RESTRICTED = "rk_live_51H8aQ2eZvKYlo2CaB3cD4eF5gH6iJ7kL8mN9oP0qR1sT2uV"
NPM = "npm_Q7vB2mX9kL4pT8wR1nZ6yH3jF5dS0aGcE1x2"
HUGGING_FACE = "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"
AZURE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURE = f"DefaultEndpointsProtocol=https;AccountName=agentdtest;AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net"
WRAPPED = "ghp_R4nD0mT0k3nV4lu3F0rT3st1ngXyZ987654"  # 40: the first line holds only 10 of them
BOXED = "sk-proj-Bx7Lq2Nw9Kd4Rt8Zm1Vc6Hy3Gf5Js0PaTe2Wu4Yo6Ii8Uk"
PEM_BODY = [
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
    "QyNTUxOQAAACDpZmFrZWtleWZvcnRlc3Rpbmdvbmx5YWdlbnRkc2VjcmV0cwAAAJhmYW",
    "tlZmFrZWZha2VmYWtlZmFrZWZha2VmYWtlZmFrZWZha2VmYWtlZmFrZWZha2VmYWtlZm",
]
FILE_KEY = "sk_live_9Zx8Wv7Ut6Sr5Qp4On3Ml2Kj1Ih0GfEdCbA"  # a file in the agent's scope is named after it

#: name -> (the secret, the steps that print it).
PLANTED: dict[str, tuple[str, list[dict]]] = {}


def plant(name: str, secret: str, *steps: str | float) -> None:
    out: list[dict] = [{"out": f"[{name}] "}]
    out += [{"sleep": s} if isinstance(s, float) else {"out": s} for s in steps]
    out.append({"out": "\r\n"})
    PLANTED[name] = (secret, out)


def wrapped_at(width: int, name: str, key: str) -> tuple[str, str]:
    """The key's two lines as a TUI wraps them at ``width``: the first line is full."""
    head = f"key: {key}"
    first = width - len(f"[{name}] ")
    return head[:first], head[first:]


plant("stripe-live", STRIPE_LIVE, f"STRIPE_API={STRIPE_LIVE}")
plant("stripe-restricted", STRIPE_RESTRICTED, f"restricted key {STRIPE_RESTRICTED} (read-only)")
plant("npm", NPM, f"npm whoami with {NPM} ok")
plant("hugging-face", HUGGING_FACE, f"logged in to the Hub as {HUGGING_FACE}.")
plant("azure", AZURE_KEY, AZURE)
plant("env-8-chars", ENV["DEPLOY_TOKEN"], f"deploying with {ENV['DEPLOY_TOKEN']} now")
_line1, _line2 = wrapped_at(COLS, "wrapped", WRAPPED)
plant("wrapped", WRAPPED, _line1, "\r\n", 0.11, _line2)
plant("boxed", BOXED, f"\r\n{BOX} key: {BOXED[:30]} {BOX}\r\n", 0.11, f"{BOX} {BOXED[30:]}                 {BOX}")
plant("pem-in-gutter", "\n".join(PEM_BODY),
      "\r\n  " + "\r\n  ".join(f"{BOX} {line}" for line in ["-----BEGIN OPENSSH PRIVATE KEY-----", PEM_BODY[0]]),
      1.0, "\r\n  " + "\r\n  ".join(f"{BOX} {line}" for line in [*PEM_BODY[1:], "-----END OPENSSH PRIVATE KEY-----"]))

DONE = "SHAPES-DONE"
FILE_NAME = f"src/{FILE_KEY}.txt"


def pieces(secret: str, size: int = 8) -> list[str]:
    """Every ``size``-character window of each line of the secret: none may be found anywhere."""
    out = []
    for line in secret.splitlines() or [secret]:
        line = line.strip()
        out += [line[i:i + size] for i in range(0, max(1, len(line) - size + 1))]
    return out


SECRETS = {name: secret for name, (secret, _) in PLANTED.items()} | {"file-name": FILE_KEY}


def leaks(text: str) -> dict[str, list[str]]:
    """Secrets (name -> pieces) found in ``text`` or in it with escape sequences removed."""
    views = (text, strip_escapes(text.encode("utf-8", "surrogateescape")).decode("utf-8", "replace"))
    found: dict[str, list[str]] = {}
    for name, secret in SECRETS.items():
        hits = [p for p in pieces(secret) if any(p in view for view in views)]
        if hits:
            found[name] = hits[:3]
    return found


def printed(name: str) -> bytes:
    """What the agent prints for plant ``name``, as the PTY hands it over (``\\n`` -> ``\\r\\n``)."""
    return "".join(s.get("out", "") for s in PLANTED[name][1]).encode()


# -- the matcher alone: the same plants ---------------------------------------------------

@pytest.mark.parametrize("name", sorted(PLANTED))
def test_the_one_pass_matcher_catches_each_plant_whole_and_in_pieces(name: str) -> None:
    data = printed(name) + b"fake> "
    secret = PLANTED[name][0]
    whole = Redactor(ENV, cols=COLS).redact(data)
    assert leaks(whole.decode()) == {} and b"[REDACTED]" in whole, whole
    r = Redactor(ENV, cols=COLS)
    steps = [s["out"].encode() for s in PLANTED[name][1] if "out" in s]
    streamed = b"".join(r.feed(step) for step in steps) + r.feed(b"fake> ") + r.flush()
    assert streamed == whole
    for cut in range(0, len(data) + 1, 3):  # and split anywhere
        r = Redactor(ENV, cols=COLS)
        out = r.feed(data[:cut]) + r.feed(data[cut:]) + r.flush()
        assert not any(p.encode() in out for p in pieces(secret)), (cut, out)


def test_the_check_itself_finds_each_plant_unredacted() -> None:
    for name in PLANTED:
        assert name in leaks(strip_escapes(printed(name)).decode()), name
    assert "file-name" in leaks(f"wrote {FILE_NAME}")


# -- the real daemon ----------------------------------------------------------------------

@pytest.fixture
def viewer_log() -> io.BytesIO:
    return io.BytesIO()


def test_the_missing_shapes_wrapped_boxed_and_a_token_file_name_leak_nowhere(
        project: Project, tmp_path: Path, viewer_log: io.BytesIO) -> None:
    root = project.root
    project.init_git()
    project.agentd("init")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('app')\n")
    steps = [step for _, s in PLANTED.values() for step in s] + [{"out": DONE + "\r\n"}]
    leak_file = tmp_path / "leak.json"
    leak_file.write_text(json.dumps(steps))
    inputs = tmp_path / "inputs.jsonl"
    inputs.touch()
    argv = json.dumps([sys.executable, str(AGENT), "--on-checkpoint", "ignore", "--input-log", str(inputs)])
    env = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in ENV.items()) + " }"
    project.unit("leaky", f"""
        [agent]
        command = {argv}
        prompt = "fake> $"
        cols = {COLS}
        env = {env}
        [scope]
        paths = ["src/**"]
        writable = [{json.dumps(str(inputs))}, {json.dumps(str(tmp_path))}]
        [restart]
        stop_timeout = 3
        [checkpoint]
        grace = 2
        """)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the project")
    project.agentd("start")
    wait_until(lambda: inputs.read_text() and project.unit_status("leaky")["turn"] == "idle", TIMEOUT,
               what="the first session to take its wakeup")

    viewer = pexpect.spawn(sys.executable, ["-m", "supervisor", "--root", str(root), "attach", "leaky", "--read-only"],
                           cwd=str(root), env=clean_env(), dimensions=(40, COLS), timeout=TIMEOUT)
    try:
        viewer.logfile_read = viewer_log
        viewer.expect(r"\[agentd\] attached to leaky")
        project.agentd("send", "leaky", f"leak {leak_file}")
        viewer.expect(DONE)
        wait_until(lambda: DONE in project.transcript("leaky"), TIMEOUT, what="the plants to reach the transcript")
        project.agentd("send", "leaky", f"write {FILE_NAME} made by the agent")
        viewer.expect("wrote src/")
        wait_until(lambda: project.unit_status("leaky")["turn"] == "idle", TIMEOUT, what="the write to end")
        viewer.send(proto.DETACH_KEY)
        viewer.expect(pexpect.EOF)
    finally:
        viewer.close(force=True)
    assert (root / FILE_NAME).exists()

    first = project.unit_status("leaky")["session"]
    assert "auto" in project.agentd("checkpoint", "leaky").stdout
    wait_until(lambda: (r := project.unit_status("leaky"))["session"] != first and r["turn"] == "idle", TIMEOUT,
               what="the fresh session to take its wakeup")
    wakeup = project.agentd("wakeup", "leaky").stdout
    wips = [json.loads(line) for line in project.agentd("wip", "list", "leaky", "--json").stdout.splitlines()]
    project.agentd("stop", "--now")
    project.agentd("recall", "--reindex")

    agent_dir = root / ".agent"
    typed = [json.loads(line)["text"] for line in inputs.read_text().splitlines()]
    typed = [t for t in typed if not t.startswith(("leak ", "write "))]  # the test's own `agentd send`s
    artifacts = {
        "viewer (attach)": viewer_log.getvalue().decode("utf-8", "replace"),
        "agentd.log": (project.state / "agentd.log").read_text(errors="replace"),
        "agentd wakeup": wakeup,
        "typed into the agent": "\n".join(typed),
        "agentd history": project.agentd("history", "leaky", "--json").stdout,
        "agentd logs": project.agentd("logs", "leaky", "-n", "400").stdout,
        "events.db": (project.state / "events.db").read_bytes().decode("latin-1"),
    }
    for secret in SECRETS.values():
        for query in [p for p in pieces(secret) if p.isalnum()][:1]:
            found = project.agentd("recall", "--events", query, check=False)
            artifacts[f"recall --events {query}"] = found.stdout + found.stderr
    for wip in wips:
        artifacts[f"WIP {wip['commit'][:12]} message"] = git(root, "log", "-1", "--format=%B", wip["commit"])
    for path in sorted((project.state / "transcripts" / "leaky").iterdir()):
        artifacts[path.name] = path.read_text(errors="replace")
    for path in sorted((project.state / "history").iterdir()):
        artifacts[f"history/{path.name}"] = path.read_text(errors="replace")
    for path in sorted(agent_dir.rglob("*")):
        if path.is_file():
            artifacts[f".agent/{path.relative_to(agent_dir)}"] = path.read_text(errors="replace")

    found = {name: hit for name, text in artifacts.items() if (hit := leaks(text))}
    assert found == {}, f"secrets found: {found}"
    # the plants did reach the places that carry agent output, redacted; the file is in the WIP commit, renamed nowhere
    assert wips and "src/[REDACTED]" in artifacts[f"WIP {wips[0]['commit'][:12]} message"]
    assert FILE_NAME in git(root, "ls-tree", "-r", "--name-only", wips[0]["commit"])  # the work itself is kept
    for name in ("viewer (attach)", f"{first}.txt", f"{first}.log", ".agent/recent-summary.md"):
        assert artifacts[name].count("[REDACTED]") >= len(PLANTED), (name, artifacts[name][-3000:])
    assert "[REDACTED]" in wakeup and typed[-1] == wakeup
