"""The daemon's CPU/RSS sample for status: answered from a recent sample, refreshed in the background."""

from __future__ import annotations

import asyncio
from typing import Any

from supervisor.daemon.commands import StatsSampler


class FakeDriver:
    def __init__(self, session_id: str = "s1") -> None:
        self.calls = 0
        self.session_id = session_id

    def stats(self) -> dict[str, int]:
        self.calls += 1
        return {"sample": self.calls}


class FakeUnit:
    def __init__(self, name: str = "u") -> None:
        self.name = name
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


def test_a_session_started_since_the_last_sample_is_waited_for() -> None:
    """A restarted (or newly started) unit would show 0, or its last session's figures: the status waits."""
    async def main() -> None:
        now = [100.0]
        sampler = StatsSampler(2.0, lambda: now[0])
        old, other = FakeUnit("a"), FakeUnit("b")
        await sampler.refresh([old, other])
        now[0] += 0.5  # within the interval: the same sample would do ...
        old.driver = FakeDriver("s2")  # ... but "a" restarted since
        await sampler.refresh([old, other])
        assert old.stats == {"sample": 1} and old.driver.calls == 1  # the new session's own figures, waited for
        assert other.driver.calls == 2
        now[0] += 3.0  # a recent sample covers both: answered at once again
        await sampler.refresh([old, other])
        assert old.driver.calls == 1 and sampler._running is not None
        old.driver = FakeDriver("s3")  # restarted while that background sample runs (it may have read s2)
        await sampler.refresh([old, other])
        assert old.driver.calls == 1 and old.stats == {"sample": 1}  # waited for a sample of s3 as well

    asyncio.run(main())
