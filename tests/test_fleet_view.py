"""One view of the fleet (issue 20 §3): two real daemons, in two clones of one bare remote.

Each daemon serves its dashboard on its own loopback port.  ``host-a`` lists
``host-b`` under ``[fleet] peers`` (its URL, and its token from B's token
file); ``agentd status --fleet`` and the dashboard's ``/api/fleet`` of A show
both hosts' units, and once B is stopped, B as not answering while A's own
units still show.  The tests run in file order: the last one stops B.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from pydantic import SecretStr

from supervisor.config.fleet import FleetSettings, Peer
from supervisor.config.settings import SettingsError, load_settings
from supervisor.web.fleet import FleetWatch, PeerView, fetch_peer, merge
from tests.conftest import Project, wait_until
from tests.web_fixtures import Dashboard, start_dashboard

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main"]


def git(*args: str, cwd: Path) -> None:
    subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def clones(base: Path) -> tuple[Path, Path]:
    """A bare remote with one commit, and two clones of it."""
    remote = base / "remote.git"
    git("init", "--bare", str(remote), cwd=base)
    git("clone", str(remote), "a", cwd=base)
    (base / "a" / "README.md").write_text("the project\n")
    git("add", "README.md", cwd=base / "a")
    git("commit", "-m", "start", cwd=base / "a")
    git("push", "origin", "HEAD:main", cwd=base / "a")
    git("clone", str(remote), "b", cwd=base)
    assert (base / "b" / "README.md").read_text() == "the project\n"
    return base / "a", base / "b"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Dashboard, Dashboard]]:
    root_a, root_b = clones(tmp_path_factory.mktemp("fleet"))
    a, b = Project(root_a), Project(root_b)
    try:
        board_b = start_dashboard(b, units=("gamma",), web='\n[fleet]\nname = "host-b"\n')
        token_file = b.state / "web-token"
        board_a = start_dashboard(a, units=("alpha", "beta"), web=f"""
[fleet]
name = "host-a"
refresh = 1
timeout = 2

[[fleet.peers]]
name = "host-b"
url = "{board_b.base}"
token_file = "{token_file}"
""")
        yield board_a, board_b
    finally:
        a.cleanup()
        b.cleanup()


def fleet_json(board: Dashboard) -> tuple[int, dict]:
    result = board.project.agentd("status", "--fleet", "--json", check=False)
    return result.returncode, json.loads(result.stdout)


def line_of(text: str, *words: str) -> str | None:
    return next((line for line in text.splitlines() if all(w in line.split() for w in words)), None)


def test_status_fleet_lists_the_units_of_both_hosts(pair: tuple[Dashboard, Dashboard]) -> None:
    a, b = pair
    code, view = fleet_json(a)
    assert code == 0, view["hosts"]
    assert [(h["name"], h["ok"]) for h in view["hosts"]] == [("host-a", True), ("host-b", True)]
    assert {c["id"] for c in view["cards"]} == {"host-a/alpha", "host-a/beta", "host-b/gamma"}
    assert {c["state"] for c in view["cards"]} == {"running"}
    result = a.project.agentd("status", "--fleet")
    for host, unit in (("host-a", "alpha"), ("host-a", "beta"), ("host-b", "gamma")):
        assert line_of(result.stdout, host, unit, "running"), result.stdout
    assert result.stdout.startswith("fleet: 2 hosts, 3 units\n")
    assert b.token not in result.stdout + json.dumps(view)
    # the plain status is unchanged: this daemon's units only
    plain = a.project.agentd("status").stdout
    assert "alpha" in plain and "gamma" not in plain


def test_the_dashboard_fleet_view_lists_both_hosts(pair: tuple[Dashboard, Dashboard]) -> None:
    a, b = pair
    view = wait_until(lambda: (v := a.json("/api/fleet"))["hosts"][1]["ok"] and v, 15, what="host-b's first answer")
    assert view["host"] == "host-a" and view["refresh"] == 1
    assert {c["id"] for c in view["cards"]} == {"host-a/alpha", "host-a/beta", "host-b/gamma"}
    assert view["hosts"][1]["url"] == b.base and view["hosts"][1]["units"] == 1 and view["alarms"] == []
    peers = a.json("/api/overview")["peers"]
    assert [(p["name"], p["host"], p["ok"]) for p in peers] == [("host-b", "host-b", True)]
    status, _h, body = a.request("GET", "/fleet")
    assert status == 200 and b"/static/fleet.js" in body
    status, _h, body = a.request("GET", "/static/fleet.js")
    assert status == 200 and b"/api/fleet" in body
    assert a.request("GET", "/api/fleet", token=False)[0] == 401
    assert b.token.encode() not in json.dumps(view).encode() + body
    # B has no peers: its own view is itself alone
    own = b.json("/api/fleet")
    assert [h["name"] for h in own["hosts"]] == ["host-b"] and {c["id"] for c in own["cards"]} == {"host-b/gamma"}


def test_the_fleet_page_in_chromium_lists_both_hosts(pair: tuple[Dashboard, Dashboard], page: Page) -> None:
    a, b = pair
    page.goto(a.url)  # the token moves into the cookie
    page.goto(a.base + "fleet")
    for host, unit in (("host-a", "alpha"), ("host-a", "beta"), ("host-b", "gamma")):
        row = page.locator(f'tr[data-id="{host}/{unit}"]')
        expect(row).to_have_attribute("data-state", "idle", timeout=10_000)
        expect(row.locator(".host-cell")).to_have_text(host)
    expect(page.locator('.host-chip[data-host="host-b"]')).to_have_attribute("data-ok", "yes")
    expect(page.locator('tr[data-id="host-a/alpha"] a')).to_have_attribute("href", "/unit/alpha")
    assert b.token not in page.content()


def test_a_refused_or_missing_token_is_named_and_never_shown(pair: tuple[Dashboard, Dashboard], tmp_path: Path) -> None:
    _a, b = pair
    wrong = "wrong-token-" + "x" * 20
    view = fetch_peer(Peer(url=b.base, name="b", token=SecretStr(wrong)), 5.0, tmp_path)
    assert not view.ok and view.error and "401" in view.error and view.cards == []
    assert wrong not in repr(view) and wrong not in json.dumps(view.as_dict())
    right = fetch_peer(Peer(url=b.base, token_file=b.project.state / "web-token"), 5.0, tmp_path)
    assert right.ok and [c["unit"] for c in right.cards] == ["gamma"]
    assert right.host == right.name == right.url.split("//")[1].rstrip("/") and right.calls_itself == "host-b"
    missing = fetch_peer(Peer(url=b.base, token_file=Path("nope-token")), 5.0, tmp_path)
    assert not missing.ok and missing.error == f"no token: token file {tmp_path / 'nope-token'}: No such file or directory"
    unset = fetch_peer(Peer(url=b.base, token_env="AGENTD_TEST_NO_SUCH_VARIABLE"), 5.0, tmp_path)
    assert unset.error == "no token: $AGENTD_TEST_NO_SUCH_VARIABLE is empty or unset"


def test_a_stopped_peer_shows_as_not_answering_while_local_units_still_show(pair: tuple[Dashboard, Dashboard],
                                                                           page: Page) -> None:
    a, b = pair
    page.goto(a.url)
    page.goto(a.base + "fleet")
    expect(page.locator('.host-chip[data-host="host-b"]')).to_have_attribute("data-ok", "yes", timeout=10_000)
    b.project.agentd("stop", "--now")
    # the open page marks host-b as not answering on one of its refreshes, and keeps host-a's units
    chip = page.locator('.host-chip[data-host="host-b"]')
    expect(chip).to_have_attribute("data-ok", "no", timeout=15_000)
    expect(chip).to_contain_text("not answering")
    expect(page.locator('tr[data-id="host-a/alpha"]')).to_have_attribute("data-state", "idle")
    expect(page.locator('tr[data-host="host-b"]')).to_have_count(0)
    view = wait_until(lambda: (v := a.json("/api/fleet"))["hosts"][1]["fetched_at"] and not v["hosts"][1]["ok"] and v,
                      15, what="host-b marked as not answering")
    host_b = view["hosts"][1]
    assert host_b["name"] == "host-b" and "refused" in host_b["error"].lower(), host_b
    assert {c["id"] for c in view["cards"]} == {"host-a/alpha", "host-a/beta"}
    assert [(al["kind"], al["host"]) for al in view["alarms"]] == [("not answering", "host-b")]
    result = a.project.agentd("status", "--fleet", check=False)
    assert result.returncode == 3, result.stdout
    assert line_of(result.stdout, "host-a", "alpha", "running") and line_of(result.stdout, "host-a", "beta", "running")
    assert "gamma" not in result.stdout
    assert f"not answering: host-b ({b.base}): " in result.stdout
    log = a.project.state.joinpath("agentd.log").read_text()
    assert "fleet_peer_not_answering" in log and b.token not in log


# ---------------------------------------------------------------------- settings, the merge, the watch
def test_fleet_settings_refuse_a_token_in_the_url_and_never_show_one(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "agentd.toml").write_text('[[fleet.peers]]\nurl = "http://127.0.0.1:9/?token=hush-hush"\ntoken_env = "T"\n')
    with pytest.raises(SettingsError) as err:
        load_settings(etc / "agentd.toml", project_root=tmp_path)
    assert "fleet.peers.0" in str(err.value) and "never in the URL" in str(err.value) and "hush-hush" not in str(err.value)
    (etc / "agentd.toml").write_text('[[fleet.peers]]\nurl = "http://127.0.0.1:9/"\ntoken = "hush-hush"\ntoken_env = "T"\n')
    with pytest.raises(SettingsError, match="exactly one of token_file, token_env, token") as err:
        load_settings(etc / "agentd.toml", project_root=tmp_path)
    assert "hush-hush" not in str(err.value)
    (etc / "agentd.toml").write_text('[fleet]\nname = "me"\n[[fleet.peers]]\nurl = "http://127.0.0.1:9"\ntoken = "hush-hush"\n')
    settings = load_settings(etc / "agentd.toml", project_root=tmp_path)
    assert settings.fleet.host_name() == "me" and settings.fleet.peers[0].label == "127.0.0.1:9"
    assert "hush-hush" not in repr(settings) + settings.model_dump_json()
    assert settings.fleet.peers[0].read_token(tmp_path) == "hush-hush"
    with pytest.raises(ValueError, match="two peers are named"):
        FleetSettings(peers=[Peer(url="http://a:1/", token_env="X"), Peer(url="http://b:1/", name="a:1", token_env="Y")])


def test_a_peer_cannot_claim_this_daemons_name_nor_flood_the_view(tmp_path: Path) -> None:
    """Issue 25 §6: a peer answering as ``host-a`` (this daemon) with 3,000 cards, some twice."""
    cards = [{"unit": "alpha", "state": "failed", "host": "host-a", "id": "host-a/alpha",
              "alarms": [{"kind": "failed", "text": "forged"}]}]
    cards += [{"unit": f"u{i:04d}", "state": "running", "host": "host-a"} for i in range(3000)]
    with peer_answering({"host": "host-a", "cards": cards, "errors": ["e"] * 500}) as (url, _seen):
        view = fetch_peer(Peer(url=url, name="build-1", token="t", max_cards=100), 10.0, tmp_path)
    assert view.ok and view.host == "build-1" and view.calls_itself == "host-a"
    assert len(view.cards) == 100 and {c["host"] for c in view.cards} == {"build-1"}
    assert [c["id"] for c in view.cards[:2]] == ["build-1/alpha", "build-1/u0000"]
    assert len(view.errors) == 51 and view.errors[-1] == \
        "build-1 sent 3001 cards; 2901 left out (at most 100: [[fleet.peers]] max_cards, one per unit name)"
    local = [{"unit": "alpha", "state": "running", "host": "host-a", "id": "host-a/alpha", "alarms": [], "warnings": []}]
    merged = merge("host-a", local, [view], 5.0)
    assert [c for c in merged["cards"] if c["host"] == "host-a"] == local  # this daemon's card alone under its name
    assert [(a["host"], a["unit"]) for a in merged["alarms"]] == [("build-1", "alpha")]  # the peer's, not host-a's
    twice = [{"unit": "x", "state": "running"}, {"unit": "x", "state": "failed"}]
    assert [c["state"] for c in _fleet_cards(twice)] == ["running"]  # one card per unit name: the first
    with pytest.raises(ValueError, match="this daemon's own name"):
        FleetSettings(name="host-a", peers=[Peer(url="http://127.0.0.1:9/", name="host-a", token_env="X")])
    with pytest.raises(ValueError, match="this daemon's own name"):
        FleetSettings(peers=[Peer(url="http://127.0.0.1:9/", name=socket.gethostname(), token_env="X")])


@contextmanager
def peer_answering(answer: dict) -> Iterator[tuple[str, list[str]]]:
    """A fake peer dashboard on loopback answering ``answer`` to every GET: (its URL, the Authorization headers seen)."""
    import http.server
    import threading

    seen: list[str] = []
    body = json.dumps(answer).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _fleet_cards(cards: list[dict]) -> list[dict]:
    from supervisor.web.fleet import _cards

    return _cards(cards, "p", 10)[0]


def test_merge_orders_hosts_cards_and_alarms() -> None:
    def c(host: str, unit: str, *alarms: str, warnings: tuple[str, ...] = ()) -> dict:
        return {"id": f"{host}/{unit}", "host": host, "unit": unit,
                "alarms": [{"kind": k, "text": k} for k in alarms], "warnings": list(warnings)}

    peers = [PeerView("p1", "http://p1/", ok=True, host="p1", cards=[c("p1", "z", "stalled"), c("p1", "a", "failed")],
                      fetched_at=1.0),
             PeerView("p2", "http://p2/", error="connection refused", fetched_at=1.0),
             PeerView("p3", "http://p3/", error="not asked yet")]
    view = merge("me", [c("me", "m", warnings=("usage limit",))], peers, 5.0)
    assert [(h["name"], h["ok"], h["pending"]) for h in view["hosts"]] == \
        [("me", True, False), ("p1", True, False), ("p2", False, False), ("p3", False, True)]
    assert [x["id"] for x in view["cards"]] == ["me/m", "p1/a", "p1/z"]
    assert [(a["host"], a["unit"], a["kind"]) for a in view["alarms"]] == \
        [("p2", None, "not answering"), ("p1", "a", "failed"), ("p1", "z", "stalled")]
    assert view["warnings"] == [{"host": "me", "unit": "m", "id": "me/m", "text": "usage limit"}]
    down = merge("me", None, [], 5.0, local_error="agentd is not running")
    assert down["hosts"][0]["ok"] is False and down["alarms"][0]["text"] == "me does not answer: agentd is not running"


def test_a_hung_peer_delays_no_other_peer(tmp_path: Path) -> None:
    """A peer that accepts and never answers, next to one that refuses: the refusal is seen at once."""
    hung = socket.create_server(("127.0.0.1", 0), backlog=4)  # never accepts: the kernel queues the connection
    spare = socket.create_server(("127.0.0.1", 0))
    refused_port = spare.getsockname()[1]
    spare.close()
    peers = (Peer(url=f"http://127.0.0.1:{hung.getsockname()[1]}/", name="hung", token="t"),
             Peer(url=f"http://127.0.0.1:{refused_port}/", name="gone", token="t"))

    async def scenario() -> tuple[PeerView, PeerView]:
        watch = FleetWatch(peers, timeout=30.0, refresh=1.0, state_dir=tmp_path)
        watch.start()
        try:
            deadline = asyncio.get_running_loop().time() + 15
            while watch.views["gone"].fetched_at is None and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
            return watch.views["gone"], watch.views["hung"]
        finally:
            hung.close()  # the hung ask gets a reset and its thread ends
            await watch.close()

    with ThreadPoolExecutor(max_workers=1) as thread:  # a loop of its own: Playwright's runs on this thread
        gone, still = thread.submit(asyncio.run, scenario()).result()
    assert gone.fetched_at is not None and not gone.ok and "refused" in (gone.error or "").lower(), gone
    assert still.fetched_at is None and still.error == "not asked yet"


def test_cards_carry_a_frozen_session_alarm_and_warnings() -> None:
    from supervisor.web.model import UnitFacts, card

    facts = UnitFacts(checkpoint_at=0.7, hard_limit=0.9, stall_after=None, checkpoint_deadline=315.0, silent_for=1.0,
                      checkpoint_started=None, last_cycle={"trigger": "threshold", "recall": 0.5})
    row = {"unit": "u", "state": "running", "turn": "idle", "context": {"used": 1, "window": 10, "ratio": 0.1,
                                                                        "window_warning": "window guessed"},
           "frozen": {"state": "approval_wait", "detail": "waits for an approval", "action": "notify"},
           "limits": {"applied": [], "unavailable": ["memory.max"]}}
    c = card(row, facts, "h", 100.0)
    assert [(a["kind"], a["text"]) for a in c["alarms"]] == [("blocked", "waits for an approval")]  # issue 27
    assert c["warnings"] == ["resource limits not applied: memory.max", "window guessed",
                             "last cycle's recall 50% (below 80%)"]
    stuck = {**row, "context": {"used": 95, "window": 100, "ratio": 0.95},
             "frozen": {"state": "stuck_above_hard_limit", "detail": "95 % for 10 min", "action": "restart"}}
    assert [a["kind"] for a in card(stuck, facts, "h", 100.0)["alarms"]] == ["frozen at the limit"]
    failed = {**row, "state": "failed", "reason": "start limit"}
    assert [a["kind"] for a in card(failed, facts, "h", 100.0)["alarms"]] == ["failed", "frozen"]
    waiting = card({"unit": "w", "state": "waiting", "reason": "rate limit until 14:00"}, facts, "h", 100.0)
    assert waiting["alarms"] == [] and waiting["warnings"][0] == "usage limit: rate limit until 14:00"
    calm = card({"unit": "c", "state": "running", "turn": "idle"}, UnitFacts(**{**facts.__dict__, "last_cycle": None}),
                "h", 100.0)
    assert calm["alarms"] == [] and calm["warnings"] == [] and calm["frozen"] is None


def test_a_peers_odd_or_hostile_cards_are_tamed(tmp_path: Path) -> None:
    """A peer names only its own cards, and what it says reaches the terminal escaped."""
    from supervisor.cli.fleet import render_fleet

    answer = {"host": "peer", "cards": [{"unit": "x\x1b[31m", "host": "host-a", "state": "running\x1b[2J",
                                         "context": {"used": "many"}, "alarms": ["not a dict", {"kind": "failed", "text": "t"}],
                                         "warnings": "not a list"}]}
    with peer_answering(answer) as (url, seen):
        view = fetch_peer(Peer(url=url, name="peer", token="tok-123"), 5.0, tmp_path)
    assert seen == ["Bearer tok-123"] and view.ok, view.error
    (c,) = view.cards
    assert c["host"] == "peer" and c["id"] == "peer/x\x1b[31m" and c["warnings"] == []
    assert c["alarms"] == [{"kind": "failed", "text": "t"}]
    text = render_fleet(merge("me", [], [view], 1.0))
    assert "\x1b" not in text and "x\\x1b[31m" in text and "alarm: peer/x\\x1b[31m: failed: t" in text
    assert line_of(text, "peer", "x\\x1b[31m", "running\\x1b[2J", "?"), text
