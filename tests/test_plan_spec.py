"""Plan files: what is accepted, and every refusal naming the file, the line, the task, the key and what to do."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path

import pytest

from supervisor.config.units import parse_unit
from supervisor.plan.planfile import PlanError, check_plan, parse_plan
from supervisor.plan.spec import deadline_at, duration

START = dt.datetime(2026, 12, 3, 22, 30, tzinfo=dt.timezone.utc).timestamp()

GOOD = """\
[plan]
description = "overnight"
deadline = "07:00"
timezone = "UTC"
tokens = 3_000_000

[defaults]
max_attempts = 4
tokens = 400_000
time = "90m"

[notify]
command = ["notify-send", "agentd"]

[[task]]
id = "models"
unit = "api"
ask = "Port the models."
done_when = "pytest -q tests/api/test_models.py"

[[task]]
id = "auth"
unit = "web"
ask = "Port the auth views."
done_when = ["pytest -q tests/web", ["ruff", "check", "web"]]
after = ["models"]
time = "1h30m"
max_attempts = 2
"""


def write(tmp: Path, text: str, name: str = "night") -> Path:
    path = tmp / "plans" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def refusal(tmp: Path, text: str) -> str:
    with pytest.raises(PlanError) as err:
        parse_plan(write(tmp, text))
    return str(err.value)


def test_a_good_plan_gets_its_defaults_and_its_deadline(tmp_path: Path) -> None:
    spec = parse_plan(write(tmp_path, GOOD))
    models, auth = spec.tasks
    assert models.done_when == ("pytest -q tests/api/test_models.py",) and models.max_attempts == 4
    assert models.tokens == 400_000 and models.time == 5400 and models.check_timeout == 600
    assert auth.done_when == ("pytest -q tests/web", ("ruff", "check", "web")) and auth.after == ("models",)
    assert auth.max_attempts == 2 and auth.time == 5400
    assert spec.units == ("api", "web") and spec.branch == "agentd/night"
    assert spec.notify is not None and spec.notify.command == ("notify-send", "agentd")
    assert spec.deadline(START) == dt.datetime(2026, 12, 4, 7, 0, tzinfo=dt.timezone.utc).timestamp()


@pytest.mark.parametrize("text,expected", [
    ("06:59", dt.datetime(2026, 12, 4, 6, 59)), ("23:00", dt.datetime(2026, 12, 3, 23, 0)),
    ("2026-12-04T05:00:00+00:00", dt.datetime(2026, 12, 4, 5, 0)), ("8h", dt.datetime(2026, 12, 4, 6, 30)),
    ("07:00:00", dt.datetime(2026, 12, 4, 7, 0)),
])
def test_deadlines(text: str, expected: dt.datetime) -> None:
    assert deadline_at(text, START, "UTC") == expected.replace(tzinfo=dt.timezone.utc).timestamp()


@pytest.mark.parametrize("value,seconds", [("45m", 2700), ("1h30m", 5400), ("90s", 90), (120, 120), ("2h", 7200)])
def test_durations(value: object, seconds: float) -> None:
    assert duration(value) == seconds


@pytest.mark.parametrize("value", ["soon", "0m", -5, True, "1d"])
def test_bad_durations_say_what_is_expected(value: object) -> None:
    with pytest.raises(ValueError, match="45m|more than 0"):
        duration(value)


def test_every_refusal_names_the_file_line_task_and_key(tmp_path: Path) -> None:
    text = GOOD.replace('done_when = "pytest -q tests/api/test_models.py"\n', "colour = 3\n")
    message = refusal(tmp_path, text)
    lines = message.splitlines()
    path = tmp_path / "plans" / "night.toml"
    assert f"{path}:15: [[task]] 'models' done_when: is required (the commands that must exit 0" in lines[0]
    assert f"{path}:19: [[task]] 'models' colour: unknown key; allowed keys: id, unit, ask, done_when" in lines[1]


@pytest.mark.parametrize("change,expected", [
    (('deadline = "07:00"', 'deadline = "25:61"'), ':3: [plan] deadline: '),
    (('tokens = 3_000_000', 'tokens = 0'), ':5: [plan] tokens: Input should be greater than 0'),
    (('tokens = 3_000_000\n', ''), ':1: [plan] tokens: is required (the whole plan\'s token budget'),
    (('[defaults]', '[default]'), ':7: [default]: unknown section; allowed: [plan], [defaults], [spinning]'),
    (('command = ["notify-send", "agentd"]', 'command = "notify-send agentd"'), ':13: [notify] command: must be an argv list'),
    (('after = ["models"]', 'after = ["modles"]'), ":26: [[task]] 'auth' after: 'modles': no task has that id"),
    (('after = ["models"]', 'after = ["auth"]'), ":26: [[task]] 'auth' after: 'auth': a task cannot wait for itself"),
    (('id = "auth"', 'id = "models"'), "task id 'models' is used twice"),
    (('id = "auth"', 'id = "a uth"'), "[[task]] 'a uth' id: 'a uth' is not a valid task id"),
    (('time = "1h30m"', 'time = "soon"'), ":27: [[task]] 'auth' time: expected seconds or text such as"),
])
def test_refusals(tmp_path: Path, change: tuple[str, str], expected: str) -> None:
    old, new = change
    assert old in GOOD
    assert expected in refusal(tmp_path, GOOD.replace(old, new))


def test_a_cycle_of_afters_is_named_whole(tmp_path: Path) -> None:
    text = GOOD + '\n[[task]]\nid = "c"\nunit = "api"\nask = "x"\ndone_when = ["true"]\nafter = ["auth"]\n'
    text = text.replace('after = ["models"]', 'after = ["c"]')
    assert "after forms a cycle: auth -> c -> auth" in refusal(tmp_path, text)


def test_not_toml_and_bad_names_are_refused_with_the_file(tmp_path: Path) -> None:
    assert "not valid TOML" in refusal(tmp_path, "[plan\n")
    with pytest.raises(PlanError, match="plan name 'Night' is not valid"):
        parse_plan(write(tmp_path, GOOD, "Night"))


# ------------------------------------------------------------------------------------------ with the units

def unit(tmp: Path, name: str, body: str) -> object:
    path = tmp / "units" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'[agent]\ncommand = ["python", "-m", "supervisor.fakeagent"]\n{textwrap.dedent(body)}')
    return parse_unit(path)


def checked(tmp: Path, units: dict[str, str], plan: str = GOOD) -> tuple[list[str], list[str]]:
    specs = {n: unit(tmp, n, b) for n, b in units.items()}
    return check_plan(parse_plan(write(tmp, plan)), specs, {}, tmp, tmp / ".agentd")  # type: ignore[arg-type]


def test_a_plan_whose_units_fit_passes(tmp_path: Path) -> None:
    errors, warnings = checked(tmp_path, {"api": '[scope]\npaths = ["src/api/**"]',
                                          "web": '[scope]\npaths = ["src/web/**"]'})
    assert errors == [] and warnings == []


def test_units_that_are_missing_overlap_or_cannot_take_a_task_are_refused(tmp_path: Path) -> None:
    errors, _ = checked(tmp_path, {"apl": '[scope]\npaths = ["src/**"]',
                                   "web": '[scope]\npaths = ["src/web/**"]\n[wakeup]\non_start = false'})
    path = tmp_path / "plans" / "night.toml"
    assert f"{path}:17: [[task]] 'models' unit: no unit 'api' in units/; did you mean 'apl'?" in errors[0]
    assert any("unit 'web' has [wakeup] on_start = false" in e for e in errors)
    errors, _ = checked(tmp_path, {"api": '[scope]\npaths = ["src/**"]', "web": '[scope]\npaths = ["src/web/**"]'})
    assert any("units 'api' and 'web' may both write" in e for e in errors), errors
    errors, _ = checked(tmp_path, {"api": '[scope]\npaths = ["a/**"]', "web": ""})
    assert any("unit 'web' has no [scope] paths" in e for e in errors)


def test_no_unit_may_write_the_plan_the_units_or_agentds_state(tmp_path: Path) -> None:
    cases = {'paths = ["plans/**", "src/api/**"]': "the plan file", 'paths = ["src/api/**", ".agentd/**"]': "agentd's state",
             'paths = ["src/api/**", "units/**"]': "the unit files",
             'paths = ["src/api/**"]\nwritable = ["plans"]': "the plan file"}
    for scope, what in cases.items():
        errors, _ = checked(tmp_path, {"api": f"[scope]\n{scope}", "web": '[scope]\npaths = ["src/web/**"]'})
        assert any(f"unit 'api' may write {what}" in e for e in errors), (scope, errors)
    # a unit outside the plan counts too when it runs by itself (enabled); a disabled one is a warning
    errors, _ = checked(tmp_path, {"api": '[scope]\npaths = ["src/api/**"]', "web": '[scope]\npaths = ["src/web/**"]',
                                   "docs": ""})
    assert any("unit 'docs' may write the plan file" in e for e in errors)
    errors, warnings = checked(tmp_path, {"api": '[scope]\npaths = ["src/api/**"]',
                                          "web": '[scope]\npaths = ["src/web/**"]', "example": "[unit]\nenabled = false"})
    assert not errors and any("unit 'example' may write the plan file" in w and "disabled" in w for w in warnings)


def test_a_check_the_agent_can_rewrite_is_warned_about(tmp_path: Path) -> None:
    errors, warnings = checked(tmp_path, {"api": '[scope]\npaths = ["src/api/**", "tests/api/**"]',
                                          "web": '[scope]\npaths = ["src/web/**"]'})
    assert not errors
    assert any("the check runs 'tests/api/test_models.py', which unit 'api''s agent may change" in w for w in warnings)


def test_a_shell_unit_cannot_take_a_task(tmp_path: Path) -> None:
    path = tmp_path / "units" / "web.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[agent]\ncommand = ["bash"]\ntalks_to = "shell"\n[scope]\npaths = ["src/web/**"]\n')
    specs = {"api": unit(tmp_path, "api", '[scope]\npaths = ["src/api/**"]'), "web": parse_unit(path)}
    errors, _ = check_plan(parse_plan(write(tmp_path, GOOD)), specs, {}, tmp_path, tmp_path / ".agentd")  # type: ignore[arg-type]
    assert any("unit 'web' talks to a shell" in e and ":23: [[task]] 'auth' unit" in e for e in errors), errors
