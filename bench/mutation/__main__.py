"""Mutation run over agentd's pure modules: ``python -m bench.mutation [MODULE ...] [-j N] [--no-write]``.

Not part of CI (it takes minutes, and its figure is a measure, not a gate);
run it with the project's interpreter (``.venv/bin/python``).  With no
module, every module of :data:`.targets.TARGETS` runs; a module may be named
by its dotted name or its path (``supervisor/daemon/lifecycle.py``) or its
last part (``lifecycle``).  The results of the modules that ran replace
theirs in ``bench/mutation/results.json``, and ``bench/mutation/RESULTS.md``
is written from that file: the score per module and each survivor, with the
reason when it is known to be equivalent.  ``--report`` rewrites
RESULTS.md from results.json (after editing a reason) without running.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .runner import KILLED, BaselineFailed, preload, run_module
from .targets import EQUIVALENT, KEPT, TARGETS

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
REPORT = HERE / "RESULTS.md"


def resolve(name: str) -> str:
    dotted = name.removesuffix(".py").replace("/", ".")
    for target in TARGETS:
        if target == dotted or target.endswith("." + dotted) or target == "supervisor." + dotted:
            return target
    raise SystemExit(f"unknown module {name!r}; known: {', '.join(TARGETS)}")


def dump(data: dict[str, Any]) -> str:
    """results.json with one mutant per line (diffs of a later run show which outcomes changed)."""
    parts = []
    for name, report in data.items():
        head = {k: v for k, v in report.items() if k != "outcomes"}
        rows = ",\n".join("   " + json.dumps(o, ensure_ascii=False) for o in report["outcomes"])
        parts.append(f" {json.dumps(name)}: {json.dumps(head, ensure_ascii=False)[:-1]}, \"outcomes\": [\n{rows}\n ]}}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def merged(old: dict[str, Any], again: dict[str, Any]) -> dict[str, Any]:
    """``old`` with the outcomes of the mutants run ``again`` replaced (the module must not have changed)."""
    fresh = {o["key"]: o for o in again["outcomes"]}
    out = dict(old, tests=again["tests"], baseline_seconds=again["baseline_seconds"],
               seconds=round(old["seconds"] + again["seconds"], 1))
    out["outcomes"] = [fresh.get(o["key"], o) for o in old["outcomes"]]
    return out


def score(module: dict[str, Any]) -> dict[str, Any]:
    outcomes = module["outcomes"]
    equivalent = EQUIVALENT.get(module["module"], {})
    killed = sum(o["status"] in KILLED for o in outcomes)
    survivors = [o for o in outcomes if o["status"] not in KILLED]
    known = [o for o in survivors if o["key"] in equivalent]
    total = len(outcomes)
    counted = total - len(known)
    return {"total": total, "killed": killed, "equivalent": len(known), "survived": len(survivors) - len(known),
            "score": round(100.0 * killed / counted, 1) if counted else 100.0,
            "raw": round(100.0 * killed / total, 1) if total else 100.0}


def write_report(data: dict[str, Any]) -> None:
    lines = ["# Mutation run: the pure modules against their own tests", "",
             "Written by `python -m bench.mutation` (see `bench/mutation/README.md` for what it does and why).",
             "Score: killed / (mutants - equivalent); raw: killed / mutants.  A timeout counts as killed.",
             "A survivor is *equivalent* (no caller can see the change; left out of the score), *kept alive* (a",
             "change a test could see but should not pin, such as a tuning number; counted against the score), or",
             "not yet killed.", "",
             "| module | mutants | killed | equivalent | surviving | score | raw | tests | seconds |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for name in TARGETS:
        module = data.get(name)
        if module is None:
            lines.append(f"| {name} | not run | | | | | | | |")
            continue
        s = score(module)
        tests = " ".join(module["tests"])
        lines.append(f"| {name} | {s['total']} | {s['killed']} | {s['equivalent']} | {s['survived']} | "
                     f"{s['score']}% | {s['raw']}% | `{tests}` | {module['seconds']} |")
    for name in TARGETS:
        module = data.get(name)
        if module is None:
            continue
        equivalent = EQUIVALENT.get(name, {})
        survivors = [o for o in module["outcomes"] if o["status"] not in KILLED]
        if not survivors:
            continue
        lines += ["", f"## {name}: survivors", ""]
        for o in survivors:
            why, kept = equivalent.get(o["key"]), KEPT.get(name, {}).get(o["key"])
            tag = (f"equivalent, because {why}" if why else f"kept alive ({o['status']}), because {kept}" if kept
                   else f"**{o['status']}: not yet killed**")
            lines.append(f"- `{o['key']}` ({o['description'].split(':')[0]}, {o['operator']}): {tag}")
    REPORT.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mutation", description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="modules to run (default: every target)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="children at a time (default 2)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave results.json and RESULTS.md")
    parser.add_argument("--report", action="store_true", help="rewrite RESULTS.md from results.json and stop")
    parser.add_argument("--survivors", action="store_true", help="print each survivor as the run goes")
    parser.add_argument("--again", action="store_true",
                        help="run only the module's survivors of results.json again (after new tests) and merge")
    args = parser.parse_args(argv)
    data: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if args.report:
        write_report(data)
        return 0
    preload()
    names = [resolve(m) for m in args.modules] or list(TARGETS)
    failed = 0
    for name in names:
        def progress(text: str) -> None:
            if not text.startswith("  ") or (args.survivors and ("survived" in text or "uncovered" in text)):
                print(text, flush=True)

        only = None
        if args.again and name in data:
            alive = {o["key"] for o in data[name]["outcomes"] if o["status"] not in KILLED}
            only = lambda m, alive=alive: m.key in alive  # noqa: E731
        try:
            report = run_module(name, TARGETS[name], parallel=args.jobs, progress=progress, only=only).as_dict()
            if only is not None:
                report = merged(data[name], report)
        except BaselineFailed as exc:
            print(exc, file=sys.stderr)
            failed += 1
            continue
        s = score(report)
        print(f"{name}: {s['killed']}/{s['total']} killed, {s['equivalent']} equivalent, "
              f"{s['survived']} surviving: {s['score']}% ({report['seconds']}s)", flush=True)
        for o in report["outcomes"]:
            if o["status"] not in KILLED and o["key"] not in EQUIVALENT.get(name, {}) | KEPT.get(name, {}):
                print(f"  {o['status']:9} {o['key']}  [{o['description'].split(':')[0]}]")
            if o["status"] == "error":
                print(o["detail"], file=sys.stderr)
        data[name] = report
        if not args.no_write:  # after each module: an interrupted run keeps what it finished
            RESULTS.write_text(dump(data))
            write_report(data)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
