"""``/metrics``: the units and the daemon in Prometheus' text format, through the official client.

A custom collector reads the units when Prometheus scrapes (nothing is kept
between scrapes), on its own :class:`~prometheus_client.CollectorRegistry`
(never the process-wide default).  The daemon's own CPU and RSS come from
the client's :class:`~prometheus_client.ProcessCollector`
(``process_cpu_seconds_total``, ``process_resident_memory_bytes``, ...).

Every per-unit series has the labels ``unit`` and ``host`` (the fleet view
scrapes several daemons).  See ``docs/metrics.md`` for the list, a scrape
configuration and alert rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from ..adapters.base import BlockKind
from ..continuity.policy import Freeze
from ..continuity.records import history_path
from .model import blocked_screen, freeze_of

#: Every state a unit can be in (``agentd_unit_state`` has one series per state, 1 for the current one).
STATES = ("inactive", "starting", "running", "stopping", "backoff", "failed", "checkpointing", "respawning", "waiting",
          "error")
#: Every freeze the session watch names (``agentd_unit_frozen`` has one series per freeze, 1 for the current one).
FREEZES = tuple(f.value for f in Freeze)
#: Every blocking screen (``agentd_unit_blocked`` has one series per screen, 1 for the one shown).
SCREENS = tuple(k.value for k in BlockKind)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class CycleCounts:
    """Lines of each unit's history file, recounted only when the file grew (a scrape reads no whole file twice)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self._seen: dict[str, tuple[int, int]] = {}  # unit -> (bytes counted, lines)

    def count(self, unit: str) -> int:
        path = history_path(self.state_dir, unit)
        try:
            size = path.stat().st_size
        except OSError:
            return 0
        done, lines = self._seen.get(unit, (0, 0))
        if size < done:
            done, lines = 0, 0
        if size > done:
            with open(path, "rb") as fh:
                fh.seek(done)
                chunk = fh.read(size - done)
            last = chunk.rfind(b"\n") + 1  # count whole lines only
            lines += chunk.count(b"\n")
            done += last
        self._seen[unit] = (done, lines)
        return lines


Row = tuple[dict[str, Any], dict[str, Any]]  # (status row, {"checkpoint_at", "hard_limit"})


class UnitCollector(Collector):
    """The per-unit series of ``rows`` (set by :meth:`Metrics.render` just before a scrape)."""

    def __init__(self, host: str, version: str, cycles: CycleCounts) -> None:
        self.host, self.version, self.cycles = host, version, cycles
        self.rows: list[Row] = []

    def collect(self) -> Iterable[Metric]:
        labels = ["unit", "host"]
        info = InfoMetricFamily("agentd", "the daemon", labels={"version": self.version, "host": self.host})
        state = GaugeMetricFamily("agentd_unit_state", "1 for the unit's current state", labels=[*labels, "state"])
        frozen = GaugeMetricFamily("agentd_unit_frozen", "1 for the freeze status names for the unit (none: all 0)",
                                   labels=[*labels, "freeze"])
        blocked = GaugeMetricFamily("agentd_unit_blocked", "1 for the blocking screen the unit shows (none: all 0)",
                                    labels=[*labels, "screen"])
        used = GaugeMetricFamily("agentd_unit_context_used_tokens", "tokens in the agent's context", labels=labels)
        window = GaugeMetricFamily("agentd_unit_context_window_tokens", "the context window", labels=labels)
        ratio = GaugeMetricFamily("agentd_unit_context_ratio", "used / window", labels=labels)
        ckpt = GaugeMetricFamily("agentd_unit_checkpoint_at_ratio", "[context] checkpoint_at", labels=labels)
        hard = GaugeMetricFamily("agentd_unit_hard_limit_ratio", "[context] hard_limit", labels=labels)
        cycles = CounterMetricFamily("agentd_unit_cycles", "continuity cycles recorded in history", labels=labels)
        restarts = CounterMetricFamily("agentd_unit_restarts", "sessions restarted since the daemon started",
                                       labels=labels)
        crashes = CounterMetricFamily("agentd_unit_crashes", "sessions that ended on their own while running",
                                      labels=labels)
        violations = CounterMetricFamily("agentd_unit_violations", "scope violations since the daemon started",
                                         labels=labels)
        queued = GaugeMetricFamily("agentd_unit_queued_sends", "texts waiting for the next turn end", labels=labels)
        since = GaugeMetricFamily("agentd_unit_seconds_since_turn_end", "seconds since the agent's last turn ended",
                                  labels=labels)
        cpu = CounterMetricFamily("agentd_unit_cpu_seconds", "CPU of the agent's process tree", labels=labels)
        rss = GaugeMetricFamily("agentd_unit_rss_bytes", "memory of the agent's process tree", labels=labels)
        for row, facts in self.rows:
            key = [row["unit"], self.host]
            for name in STATES:
                state.add_metric([*key, name], 1.0 if row.get("state") == name else 0.0)
            freeze, screen = freeze_of(row), blocked_screen(row)
            for name in _with(FREEZES, freeze):
                frozen.add_metric([*key, name], 1.0 if freeze == name else 0.0)
            for name in _with(SCREENS, screen):
                blocked.add_metric([*key, name], 1.0 if screen == name else 0.0)
            ctx = row.get("context")
            if ctx:
                used.add_metric(key, ctx["used"])
                window.add_metric(key, ctx["window"])
                ratio.add_metric(key, ctx["ratio"])
            ckpt.add_metric(key, facts["checkpoint_at"])
            hard.add_metric(key, facts["hard_limit"])
            cycles.add_metric(key, self.cycles.count(row["unit"]))
            restarts.add_metric(key, row.get("restarts") or 0)
            crashes.add_metric(key, row.get("crashes") or 0)
            violations.add_metric(key, row.get("violations") or 0)
            queued.add_metric(key, row.get("queued_sends") or 0)
            if row.get("since_turn_end") is not None:
                since.add_metric(key, row["since_turn_end"])
            if row.get("cpu_seconds") is not None:
                cpu.add_metric(key, row["cpu_seconds"])
            if row.get("rss_bytes") is not None:
                rss.add_metric(key, row["rss_bytes"])
        yield from (info, state, frozen, blocked, used, window, ratio, ckpt, hard, cycles, restarts, crashes, violations, queued, since,
                    cpu, rss)


def _with(known: tuple[str, ...], current: str | None) -> tuple[str, ...]:
    """``known``, and ``current`` when it is a name not known here (a newer freeze or screen still gets its 1)."""
    return known if current is None or current in known else (*known, current)


class Metrics:
    """The registry ``/metrics`` renders."""

    def __init__(self, host: str, version: str, state_dir: Path) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.units = UnitCollector(host, version, CycleCounts(state_dir))
        self.registry.register(self.units)
        ProcessCollector(namespace="", registry=self.registry)

    def render(self, rows: list[Row]) -> bytes:
        self.units.rows = rows
        try:
            return generate_latest(self.registry)
        finally:
            self.units.rows = []
