"""The fake agent with one more command, ``leak FILE``: print scripted pieces, with pauses.

FILE is a JSON list of steps: ``{"out": TEXT}`` writes TEXT to the terminal at
once (escape sequences included), ``{"sleep": S}`` pauses S seconds.  Used by
the security suite to print planted secrets the way agents do: whole, in
pieces some time apart, with colour codes or cursor moves inside.  Everything
else is :mod:`supervisor.fakeagent` (a test double, not an agent).

Run: ``python tests/security/leaky_agent.py [fake agent flags]``
"""

from __future__ import annotations

import json
import sys
import time

from supervisor import fakeagent


def cmd_leak(agent: fakeagent.FakeAgent, rest: str) -> None:
    with open(rest.strip(), encoding="utf-8") as f:
        steps = json.load(f)
    for step in steps:
        if "sleep" in step:
            time.sleep(float(step["sleep"]))
        else:
            fakeagent.out(step["out"])


fakeagent.COMMANDS["leak"] = cmd_leak

if __name__ == "__main__":
    sys.exit(fakeagent.main())
