"""The README's set-up commands are what CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readme_test_command() -> None:
    blocks = re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) >= 2, "README must open with the run command and the test command"
    test_command = blocks[1].strip()
    assert "pytest" in test_command
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert test_command in ci_lines
    # CI sets CI=true itself (a skip is then a failure: tests/conftest.py), whoever calls it
    assert "export CI=true" in ci_lines and ci_lines.index("export CI=true") < ci_lines.index(test_command)
    assert "agentd start" in blocks[0] and "agentd status" in blocks[0]
