"""The daemon's CPU/RSS sample for status: answered from a recent sample, refreshed in the background."""

from __future__ import annotations

import asyncio
from typing import Any

from supervisor.daemon.commands import StatsSampler


class FakeDriver:
    def __init__(self) -> None:
        self.calls = 0

    def stats(self) -> dict[str, int]:
        self.calls += 1
        return {"sample": self.calls}


class FakeUnit:
    def __init__(self) -> None:
        self.driver: Any = FakeDriver()
        self.stats: dict[str, int] | None = None


def test_status_answers_from_a_recent_sample_and_samples_again_behind_it() -> None:
    async def main() -> None:
        now = [100.0]
        sampler = StatsSampler(2.0, lambda: now[0])
        unit = FakeUnit()
        await sampler.refresh([unit])  # [unit] stands for UnitSupervisors
        assert unit.stats == {"sample": 1}  # no sample yet: the status waited for one
        now[0] += 1.0
        await sampler.refresh([unit])
        assert unit.driver.calls == 1  # within the interval: no new sample
        now[0] += 2.0
        await sampler.refresh([unit])
        assert unit.stats == {"sample": 1}  # older than the interval but recent: answered at once with it ...
        assert sampler._running is not None
        await sampler._running
        assert unit.stats == {"sample": 2}  # ... and sampled again behind the answer
        now[0] += 10.0
        await sampler.refresh([unit])
        assert unit.stats == {"sample": 3}  # older than 3 intervals: waited for

    asyncio.run(main())
