"""The dashboard over HTTP: the token, the origin check, /metrics, the API; and its pure parts.

A real daemon with fake-agent units serves the page on a free loopback port
(tests/web_fixtures.py).  The browser tests are tests/test_web_browser.py.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from supervisor.config.web import WebSettings, is_loopback
from supervisor.web.metrics import Metrics
from supervisor.web.model import Display, UnitFacts, alarms, blocked_screen, card, display, recall_of, warnings
from tests.conftest import Project, clean_env, wait_until
from tests.web_fixtures import Dashboard, dashboard, shared, start_dashboard  # noqa: F401 - fixtures

FACTS = UnitFacts(checkpoint_at=0.7, hard_limit=0.9, stall_after=None, checkpoint_deadline=315.0, silent_for=5.0,
                  checkpoint_started=None, last_cycle=None)


def test_without_the_token_every_route_answers_401(shared: Dashboard) -> None:
    for path in ("/", "/unit/alpha", "/timeline", "/api/overview", "/api/events", "/metrics", "/static/app.css"):
        status, _h, body = shared.request("GET", path, token=False)
        assert status == 401, (path, status)
        assert b"agentd web" in body
    status, _h, _b = shared.request("GET", "/api/overview", token=False, headers={"Authorization": "Bearer nope"})
    assert status == 401
    status, _h, _b = shared.request("GET", "/?token=nope", token=False)
    assert status == 401


def test_the_token_url_sets_a_cookie_and_drops_the_token_from_the_address(shared: Dashboard) -> None:
    status, headers, _b = shared.request("GET", "/?token=" + shared.token, token=False)
    assert status == 302 and headers["Location"] == "/"
    cookie = headers["Set-Cookie"]
    assert shared.token in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    name = cookie.split("=", 1)[0]
    status, headers, body = shared.request("GET", "/", token=False, headers={"Cookie": f"{name}={shared.token}"})
    assert status == 200 and b"<title>agentd</title>" in body
    assert headers["Referrer-Policy"] == "no-referrer" and "frame-ancestors 'none'" in headers["Content-Security-Policy"]


def test_a_post_from_another_origin_is_refused(dashboard: Dashboard) -> None:
    name = "agentd_token_" + dashboard.base.rstrip("/").rsplit(":", 1)[1]
    cookie = {"Cookie": f"{name}={dashboard.token}"}
    own = dashboard.base.rstrip("/")
    for headers in ({**cookie, "Origin": "http://evil.example"}, {**cookie, "Origin": "null"}, cookie):
        status, _h, body = dashboard.request("POST", "/api/units/alpha/stop", token=False, headers=headers, body={"now": True})
        assert status == 403, (headers, status, body)
    assert dashboard.project.unit_status("alpha")["state"] == "running"
    # without the token, even from its own origin
    status, _h, _b = dashboard.request("POST", "/api/units/alpha/stop", token=False, headers={"Origin": own}, body={})
    assert status == 401
    # the page's own origin with the token: the action is done
    status, _h, body = dashboard.request("POST", "/api/units/alpha/stop", token=False, headers={**cookie, "Origin": own},
                                         body={"now": True})
    assert status == 200, body
    dashboard.project.wait_state("alpha", "inactive")


def test_a_host_that_is_not_loopback_is_refused(shared: Dashboard) -> None:
    status, _h, _b = shared.request("GET", "/api/overview", headers={"Host": "evil.example:80"})
    assert status == 403


def test_metrics_parse_with_the_prometheus_parser(shared: Dashboard) -> None:
    status, headers, body = shared.request("GET", "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    states = {(s.labels["unit"], s.labels["state"]): s.value for s in families["agentd_unit_state"].samples}
    assert states[("alpha", "running")] == 1.0 and states[("alpha", "failed")] == 0.0
    assert {s.labels["unit"] for s in families["agentd_unit_context_window_tokens"].samples} == {"alpha", "beta"}
    for name in ("agentd_unit_context_used_tokens", "agentd_unit_cycles", "agentd_unit_restarts", "agentd_unit_crashes",
                 "agentd_unit_violations", "agentd_unit_queued_sends", "agentd_unit_hard_limit_ratio", "process_cpu_seconds",
                 "process_resident_memory_bytes"):
        assert name in families, name
    assert families["process_resident_memory_bytes"].samples[0].value > 1e6


def test_metrics_public_on_loopback_opens_metrics_only(project: Project) -> None:
    board = start_dashboard(project, units=("solo",), web="metrics_public = true\n")
    status, _h, body = board.request("GET", "/metrics", token=False)
    assert status == 200 and b"agentd_unit_state" in body
    assert board.request("GET", "/api/overview", token=False)[0] == 401


def test_the_api_lists_units_with_host_cards_and_refuses_what_agentd_refuses(shared: Dashboard) -> None:
    overview = shared.json("/api/overview")
    ids = {c["id"]: c for c in overview["cards"]}
    assert set(ids) == {f"{overview['host']}/alpha", f"{overview['host']}/beta"}
    assert all(c["display"]["key"] in {d.value for d in Display} for c in ids.values())
    detail = shared.json("/api/units/alpha")
    assert detail["card"]["unit"] == "alpha" and "wakeup" in detail and detail["cycles"] == []
    status, _h, body = shared.request("POST", "/api/units/alpha/send", body={"text": 5})
    assert status == 409 and "text must be a string" in json.loads(body)["error"]
    status, _h, _b = shared.request("GET", "/api/units/nosuch")
    assert status == 404
    before = shared.json("/api/units/alpha")["card"]
    status, _h, body = shared.request("POST", "/api/units/alpha/send", body={"text": "echo via-api"})
    assert status == 200, body
    # the answer names the unit's state and change count as it was given: the page follows later cards only
    seen = json.loads(body)["unit"]
    assert seen["state"] == "running" and seen["version"] >= before["version"]
    wait_until(lambda: "via-api" in shared.project.transcript("alpha"), 10, what="the sent text")


# ---------------------------------------------------------------------- pure parts
def row(**kw: object) -> dict:
    base = {"unit": "u", "state": "running", "turn": "idle", "context": None, "since_turn_end": None, "schedule": None}
    return {**base, **kw}


def test_display_states() -> None:
    assert display(row(turn="busy")) is Display.IN_TURN
    assert display(row(turn="idle")) is Display.IDLE
    assert display(row(state="respawning")) is Display.CHECKPOINTING
    assert display(row(state="inactive")) is Display.STOPPED
    assert display(row(state="inactive", schedule={"start": "2026-01-01T22:00:00"})) is Display.WAITING
    assert display(row(state="inactive", reason="not started: requires 'db', which is failed")) is Display.WAITING
    assert display(row(state="failed")) is Display.FAILED


def test_alarms() -> None:
    ctx = {"used": 95, "window": 100, "ratio": 0.95}
    assert [a["kind"] for a in alarms(row(context=ctx), FACTS, 0)] == ["frozen at the limit"]
    assert alarms(row(context={**ctx, "ratio": 0.5}), FACTS, 0) == []
    assert [a["kind"] for a in alarms(row(state="failed", reason="start limit hit"), FACTS, 0)] == ["failed"]
    stalled = UnitFacts(**{**FACTS.__dict__, "silent_for": 1000.0})
    assert [a["kind"] for a in alarms(row(turn="busy"), stalled, 0)] == ["stalled"]
    assert alarms(row(turn="idle"), stalled, 0) == []
    compacted = UnitFacts(**{**FACTS.__dict__, "last_cycle": {"trigger": "agent compacted"}})
    assert [a["kind"] for a in alarms(row(since_turn_end=300.0), compacted, 0)] == ["idle after compaction"]
    assert alarms(row(since_turn_end=30.0), compacted, 0) == []
    ckpt = UnitFacts(**{**FACTS.__dict__, "checkpoint_started": "2026-01-01T00:00:00Z"})
    start = 1767225600.0
    assert [a["kind"] for a in alarms(row(state="checkpointing"), ckpt, start + 400)] == ["checkpoint deadline passed"]
    assert alarms(row(state="checkpointing"), ckpt, start + 100) == []


def test_a_card_names_its_host() -> None:
    c = card(row(since_turn_end=10.0), FACTS, "h1", 1000.0)
    assert c["id"] == "h1/u" and c["host"] == "h1" and c["last_turn_end"] == 990.0


def test_web_settings() -> None:
    assert is_loopback("127.0.0.2") and is_loopback("::1") and is_loopback("localhost") and not is_loopback("0.0.0.0")
    try:
        WebSettings(listen="0.0.0.0", metrics_public=True)
    except ValueError as exc:
        assert "loopback" in str(exc)
    else:
        raise AssertionError("metrics_public off loopback must be refused")


def test_the_timeline_merges_every_module_with_the_global_log(shared: Dashboard) -> None:
    project = shared.project
    project.agentd("decide", "first, global", "--why", "because it applies to all, so it is global", "--global",
                   "--tag", "arch")
    project.agentd("decide", "second, in module beta", "--why", "because beta owns it, so beta decides",
                   "--module", "beta", "--tag", "deps")
    found = shared.json("/api/timeline")
    mine = [d for d in found["decisions"] if d["decision"] in ("first, global", "second, in module beta")]
    assert [(d["module"], d["tags"]) for d in mine] == [("global", ["arch"]), ("beta", ["deps"])]
    assert all(d["t"] for d in mine) and set(found["units"]) == {"alpha", "beta"}


def test_a_listen_address_beyond_loopback_still_needs_the_token_and_says_so(project: Project) -> None:
    board = start_dashboard(project, units=("solo",), web='listen = "0.0.0.0"\n')
    said = project.agentd("web").stderr
    assert "reachable from other machines" in said and "needs the token" in said
    assert project.events("web_not_loopback")
    # any Host is accepted off loopback (no rebinding check), never without the token
    status, _h, _b = board.request("GET", "/api/overview", token=False, headers={"Host": "agentd.example:8765"})
    assert status == 401
    status, _h, _b = board.request("GET", "/api/overview", headers={"Host": "agentd.example:8765"})
    assert status == 200


# ---------------------------------------------------------------------- issue 27: blocked, frozen, error; recall
BLOCKED = {"state": "blocked_screen", "detail": "blocked: login for 3s; run `codex login`", "action": "notify"}


def test_a_blocked_screen_a_stopped_process_and_the_error_state_are_shown_as_such() -> None:
    assert display(row(turn="busy", frozen=BLOCKED)) is Display.BLOCKED
    assert display(row(frozen={**BLOCKED, "state": "approval_wait", "detail": "blocked: approval for 9s"})) \
        is Display.BLOCKED
    assert display(row(turn="busy", frozen={"state": "stopped_process", "detail": "SIGSTOP"})) is Display.FROZEN
    assert display(row(turn="busy", frozen={"state": "cycle_storm", "detail": "x"})) is Display.IN_TURN  # it works on
    assert display(row(state="error")) is Display.ERROR and display(row(state="failed")) is Display.FAILED
    assert display(row(state="inactive", frozen=BLOCKED)) is Display.STOPPED  # a frozen row of a stopped unit
    c = card(row(turn="busy", frozen=BLOCKED), FACTS, "h", 0.0)
    assert c["display"]["label"] == "blocked: login" and c["blocked"] == "login"
    assert [(a["kind"], a["text"]) for a in c["alarms"]] == [("blocked", BLOCKED["detail"])]
    assert blocked_screen(row(blocked={"kind": "trust"})) == "trust" and blocked_screen(row(blocked="update (run x)")) \
        == "update" and blocked_screen(row()) is None
    assert [a["kind"] for a in alarms(row(state="error", reason="handler raised"), FACTS, 0)] == ["error"]
    assert "reset-failed" in alarms(row(state="failed", reason="start limit hit"), FACTS, 0)[0]["text"]


def test_a_cycle_records_recall_and_wip_are_read_as_history_reads_them() -> None:
    record = {"started": "2026-01-01T00:00:00Z", "trigger": "threshold", "ratio": 0.05, "wip": "3d092b254d0d" + "0" * 28,
              "recall": {"recall": 0.6667, "found": 2, "probes": 3, "missing": ["decision (global)"], "checked": []}}
    facts = UnitFacts(**{**FACTS.__dict__, "last_cycle": record})
    last = card(row(), facts, "h", 0.0)["last_cycle"]
    assert last["wip"] == record["wip"] and "wip_commit" not in last
    assert last["recall"] == {"recall": 0.6667, "found": 2, "probes": 3, "missing": ["decision (global)"]}
    assert warnings(row(), record) == ["last cycle's recall 67% (below 80%), missing: decision (global)"]
    assert recall_of({"recall": {"recall": True}}) is None and recall_of({"recall": "high"}) is None
    assert recall_of({"recall": 0.5}) == {"recall": 0.5, "found": None, "probes": None, "missing": []}
    assert card(row(), FACTS, "h", 0.0)["last_cycle"] is None


def _families(rows: list[tuple[dict, dict]]) -> dict:
    metrics = Metrics("h", "0", Path("/nonexistent"))
    return {f.name: f for f in text_string_to_metric_families(metrics.render(rows).decode())}


def test_metrics_have_a_series_for_a_blocked_a_frozen_and_an_error_unit() -> None:
    limits = {"checkpoint_at": 0.7, "hard_limit": 0.9}
    families = _families([(row(unit="stuck", frozen=BLOCKED), limits),
                          (row(unit="storm", frozen={"state": "cycle_storm", "detail": "x"}), limits),
                          (row(unit="broken", state="error", frozen=None), limits), (row(unit="fine"), limits)])
    blocked = {(s.labels["unit"], s.labels["screen"]): s.value for s in families["agentd_unit_blocked"].samples}
    frozen = {(s.labels["unit"], s.labels["freeze"]): s.value for s in families["agentd_unit_frozen"].samples}
    state = {(s.labels["unit"], s.labels["state"]): s.value for s in families["agentd_unit_state"].samples}
    assert {k for k, v in blocked.items() if v} == {("stuck", "login")}
    assert {k for k, v in frozen.items() if v} == {("stuck", "blocked_screen"), ("storm", "cycle_storm")}
    from supervisor.adapters.base import BlockKind

    screens = {s for (u, s) in blocked if u == "fine"}  # a series for every screen agentd can name
    assert screens == {k.value for k in BlockKind} and screens >= {"trust", "login", "update", "approval", "unreachable"}
    assert {f for (u, f) in frozen if u == "fine"} >= {"blocked_screen", "stopped_process", "cycle_storm",
                                                       "memory_unwritable", "approval_wait"}
    assert state[("broken", "error")] == 1.0 and state[("fine", "error")] == 0.0


# ---------------------------------------------------------------------- issue 27 §4: two projects, one machine
def test_a_second_projects_dashboard_takes_a_free_port_and_web_port_moves_it(project: Project, tmp_path: Path) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    wanted = holder.getsockname()[1]  # free now; the first project takes it, the second wants it too
    holder.close()
    second = Project(tmp_path / "second")
    try:
        for proj in (project, second):
            proj.fake_unit("solo")
            (proj.root / "etc").mkdir(exist_ok=True)
            (proj.root / "etc" / "agentd.toml").write_text(f"[web]\nport = {wanted}\n")
            proj.agentd("start")
        first = json.loads(project.agentd("web", "--json").stdout)
        assert first["port"] == wanted and first["note"] is None
        said = second.agentd("web")
        info = json.loads(second.agentd("web", "--json").stdout)
        assert info["port"] != wanted and info["requested"] == wanted
        assert f"port {wanted} is taken" in said.stderr and f"serving on {info['port']}" in said.stderr
        assert second.events("web_port_taken")[-1]["port"] == info["port"]
        token = Path(info["token_file"]).read_text().strip()

        def overview(port: int) -> int:
            board = Dashboard(second, "", f"http://127.0.0.1:{port}/", token)
            return board.request("GET", "/api/overview")[0]

        assert overview(info["port"]) == 200 and overview(wanted) == 401  # the first project's own dashboard
        # --port N: exactly N; a taken one is refused and the dashboard stays where it was
        refused = second.agentd("web", "--port", str(wanted), check=False)
        assert refused.returncode != 0 and "another program holds it" in refused.stderr
        assert f"stays on port {info['port']}" in refused.stderr and overview(info["port"]) == 200
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        free = holder.getsockname()[1]
        holder.close()
        moved = second.agentd("web", "--port", str(free))
        assert f"127.0.0.1:{free}/" in moved.stdout and f"moved from port {info['port']}" in moved.stderr
        assert overview(free) == 200
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", info["port"]), timeout=2).close()
        # AGENTD_WEB__PORT in the command's environment asks for that port (the daemon's was fixed at its start)
        via_env = json.loads(second.agentd("web", "--json", env=clean_env(AGENTD_WEB__PORT=str(wanted))).stdout)
        assert via_env["requested"] == wanted and via_env["port"] not in (wanted, free) and via_env["note"]
        assert json.loads(second.agentd("web", "--json").stdout)["port"] == via_env["port"]  # asked again: stays
        bad = second.agentd("web", env=clean_env(AGENTD_WEB__PORT="eighty"), check=False)
        assert bad.returncode != 0 and "AGENTD_WEB__PORT" in bad.stderr and "Traceback" not in bad.stderr
    finally:
        second.cleanup()


def test_the_web_command_refuses_a_port_that_is_not_one(shared: Dashboard) -> None:
    from supervisor.control.client import Client
    from supervisor.control.framing import ControlError

    with Client(shared.project.state / "agentd.sock", timeout=30) as client:
        for port in ("8080", -1, 70000, True):
            with pytest.raises(ControlError, match="port must be a port number"):
                client.call("web", port=port, exact=True)
