"""The dashboard's Plan page, its API and stream, and the plans' series in ``/metrics``.

::

    GET /plans                   the page: the runs, the one chosen (``?name=``), task by task; made for a phone
    GET /api/plans               every run's summary (state, totals)
    GET /api/plans/{name}        a run's report (supervisor.plan.report.build: what ``agentd plan report --json`` prints)
    GET /api/plans/events        the page's stream: ``recent`` (at connect: the last events), ``event`` (each
                                 plan or unit event, as [notify] gets it)
                                 and ``changed`` ({"plan"}: its state was written; the page fetches the report)

Like every route, they need the token (supervisor.web.auth).  The daemon's
:class:`~supervisor.plan.service.PlanService` is ``daemon.plans``; without it
the API answers empty.  ``/metrics`` gains ``agentd_plan_tasks{plan,state}``,
``agentd_plan_tokens{plan}``, ``agentd_plan_token_budget{plan}``,
``agentd_plan_deadline_timestamp_seconds{plan}`` and
``agentd_plan_events_total{plan,event}`` (:class:`PlanCollector`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .stream import HEARTBEAT, sse

STATIC = Path(__file__).resolve().parent / "static"
STATES = ("pending", "active", "checking", "integrating", "done", "parked", "blocked")


def _plans(host: Any) -> Any:
    return getattr(host.daemon, "plans", None)


def plan_routes(host: Any) -> list[web.RouteDef]:
    async def page(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "plan.html", headers={"Content-Type": "text/html; charset=utf-8"})

    async def listing(request: web.Request) -> web.StreamResponse:
        service = _plans(host)
        plans = await asyncio.to_thread(service.status) if service is not None else []
        return web.json_response({"plans": plans})

    async def one(request: web.Request) -> web.StreamResponse:
        from ..control.framing import ControlError

        service = _plans(host)
        if service is None:
            raise web.HTTPNotFound(text="plans are not available in this daemon", content_type="text/plain")
        try:
            report = await asyncio.to_thread(service.report, request.match_info["name"])
        except ControlError as exc:
            raise web.HTTPNotFound(text=str(exc), content_type="text/plain") from None
        return web.json_response(report)

    async def events(request: web.Request) -> web.StreamResponse:
        service = _plans(host)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                               "X-Accel-Buffering": "no"})
        await response.prepare(request)
        if service is None:
            await response.write(b"retry: 5000\n\n")
            return response
        queue = service.announcer.subscribe()
        versions = {name: r.version for name, r in service.runners.items()}
        waited = 0.0
        try:
            await response.write(b"retry: 1000\n\n" + sse("recent", service.announcer.recent[-50:]))
            while not host.closing.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    event = await asyncio.wait_for(queue.get(), 1.0)
                    await response.write(sse("event", event))
                    waited = 0.0
                    continue
                waited += 1.0
                out = b""
                for name, runner in list(service.runners.items()):
                    if versions.get(name) != runner.version:
                        versions[name] = runner.version
                        out += sse("changed", {"plan": name})
                if out or waited >= HEARTBEAT:
                    await response.write(out or b": ping\n\n")
                    waited = 0.0
        except ConnectionError:
            pass
        finally:
            service.announcer.unsubscribe(queue)
        return response

    return [web.get("/plans", page), web.get("/api/plans", listing), web.get("/api/plans/events", events),
            web.get("/api/plans/{name}", one)]


class PlanCollector(Collector):
    """The runs this daemon knows, read when Prometheus scrapes (nothing kept between scrapes)."""

    def __init__(self, service: Any, host: str) -> None:
        self.service, self.host = service, host

    def collect(self) -> Iterable[Metric]:
        labels = ["plan", "host"]
        tasks = GaugeMetricFamily("agentd_plan_tasks", "tasks of the plan's latest run in each state",
                                  labels=[*labels, "state"])
        used = GaugeMetricFamily("agentd_plan_tokens", "tokens the run's tasks spent", labels=labels)
        budget = GaugeMetricFamily("agentd_plan_token_budget", "the run's token budget", labels=labels)
        deadline = GaugeMetricFamily("agentd_plan_deadline_timestamp_seconds", "the run's deadline (epoch)",
                                     labels=labels)
        running = GaugeMetricFamily("agentd_plan_running", "1 while the run goes on", labels=labels)
        events = CounterMetricFamily("agentd_plan_events", "events announced ([notify], the Plan page)",
                                     labels=[*labels, "event"])
        for name, runner in list(self.service.runners.items()):
            state, key = runner.state, [name, self.host]
            for s in STATES:
                tasks.add_metric([*key, s], sum(1 for t in state.tasks.values() if t.status.value == s))
            used.add_metric(key, state.tokens)
            budget.add_metric(key, state.tokens_budget)
            deadline.add_metric(key, state.deadline)
            running.add_metric(key, 1.0 if state.status.value != "ended" else 0.0)
        for (plan, event), count in sorted(self.service.announcer.counts.items()):
            events.add_metric([plan, self.host, event], count)
        yield from (tasks, used, budget, deadline, running, events)


def register_metrics(registry: Any, daemon: Any, host: str) -> None:
    """Add the plans' series to the dashboard's registry (when the daemon has plans)."""
    service = getattr(daemon, "plans", None)
    if service is not None:
        registry.register(PlanCollector(service, host))
