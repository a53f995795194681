"""Run every bench in its quick mode, each under a time bound, and write one table.

Issue #17, deliverable 5: one command that runs them all with a bounded time
and writes a single table — every figure with its target and anchor beside
it and whether it is met, and the load average before and after each bench.

Each bench runs as its own process (``--quick --json PATH``) in its own
process group, so a bench that overruns its bound is stopped with everything
it started (relay, engine, worker processes). A bench that is absent, fails
or times out is listed with a note and the run goes on. The whole run is
bounded by ``--budget`` seconds (default 600).

Run: ``.venv/bin/python bench/run_all.py [--output FILE] [--only a,b] [--budget S]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import format_load, judge, load_average

HERE = Path(__file__).resolve().parent

#: (name, script, time bound in seconds[, extra arguments]), issue #17's
#: figures first. The throughput bench runs twice: its quick 10,000 messages,
#: where one process start is a large share of the whole, and the 50,000 of
#: its full mode ("a large backlog", #17), in two rounds.
BENCHES: list[tuple[str, str, float] | tuple[str, str, float, tuple[str, ...]]] = [
    ("age", "bench_age.py", 150.0),
    ("sync", "bench_sync.py", 150.0),
    ("startup", "bench_startup.py", 120.0),
    ("throughput", "bench_throughput.py", 150.0),
    ("throughput-50k", "bench_throughput.py", 150.0, ("--messages", "50000")),
    ("e2e", "bench_e2e.py", 180.0),
    ("relay", "bench_relay.py", 90.0),
    ("codec", "bench_codec.py", 45.0),
    ("store", "bench_store.py", 60.0),
    ("read_state", "bench_read_state.py", 90.0),
    ("driver", "bench_driver.py", 90.0),
    ("guard", "bench_guard.py", 45.0),
    ("live", "bench_live.py", 240.0),
    ("capacity", "bench_capacity.py", 240.0),
]


@dataclass
class Outcome:
    name: str
    status: str
    seconds: float = 0.0
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    figures: list[dict[str, Any]] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def run_bench(
    name: str, script: Path, bound: float, out_dir: Path, extra: tuple[str, ...] = ()
) -> Outcome:
    json_path = out_dir / f"{name}.json"
    log_path = out_dir / f"{name}.log"
    before = load_average()
    started = time.perf_counter()
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, str(script), "--quick", *extra, "--json", str(json_path)],
            cwd=HERE.parent,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: a timeout stops all it started
        )
        try:
            code = process.wait(timeout=bound)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
    outcome = Outcome(name, "ok", time.perf_counter() - started, before, load_average())
    if code is None:
        outcome.status = f"timed out after {bound:.0f} s"
    elif code != 0:
        outcome.status = f"failed (exit {code})"
    if code != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
        outcome.notes.append(f"log {log_path}: " + " / ".join(tail))
    if json_path.exists():
        try:
            data = json.loads(json_path.read_text())
        except ValueError as exc:
            outcome.notes.append(f"unreadable JSON: {exc}")
        else:
            outcome.figures = figures_of(data)
            memory = data.get("memory") if isinstance(data, dict) else None
            outcome.memory = memory if isinstance(memory, dict) else {}
            notes = data.get("notes") if isinstance(data, dict) else None
            if isinstance(notes, list):
                outcome.notes += [str(n) for n in notes]
    elif code == 0:
        outcome.status = "ok, but wrote no JSON"
    return outcome


def figures_of(data: Any) -> list[dict[str, Any]]:
    """The figures of a bench's JSON: its ``figures`` list (see
    ``bench/_common.py``), or else every number in it, by its path."""
    if isinstance(data, dict) and isinstance(data.get("figures"), list):
        out = []
        for item in data["figures"]:
            if isinstance(item, dict) and isinstance(item.get("value"), int | float):
                figure = dict(item)
                if figure.get("met") is None and isinstance(figure.get("target"), str):
                    figure["met"] = judge(float(figure["value"]), figure["target"])
                out.append(figure)
        return out
    flat: list[dict[str, Any]] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int | float):
            flat.append({"name": path, "value": value, "unit": ""})
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in ("load_before", "load_after", "load", "seconds"):
                    walk(item, f"{path}.{key}" if path else str(key))

    walk(data, "")
    return flat


def number(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.3g}" if abs(value) < 0.1 else f"{value:.2f}"


def loads(values: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in values)


def table(outcomes: list[Outcome], total: float, started_load: str) -> str:
    lines = [
        "| bench | figure | value | target | anchor | source | met |",
        "|---|---|---:|---|---|---|---|",
    ]
    met = missed = 0
    for o in outcomes:
        ran = f"; {o.seconds:.0f} s; load {loads(o.load_before)} → {loads(o.load_after)}"
        lines.append(f"| **{o.name}** | *{o.status}{ran if o.seconds else ''}* | | | | | |")
        for f in o.figures:
            verdict = {True: "met", False: "**MISSED**", None: ""}[f.get("met")]
            met += f.get("met") is True
            missed += f.get("met") is False
            name = str(f.get("name", "")).replace("|", "/")
            unit = f.get("unit") or ""
            lines.append(
                f"| {o.name} | {name} | {number(float(f['value']))} {unit} "
                f"| {f.get('target') or ''} | {f.get('anchor') or ''} "
                f"| {f.get('source') or ''} | {verdict} |"
            )
        for label, peak in o.memory.items():
            if isinstance(peak, dict) and "rss_mb" in peak:
                lines.append(
                    f"| {o.name} | peak memory, {label} | RSS {peak['rss_mb']} MiB, "
                    f"PSS {peak.get('pss_mb', '?')} MiB | | | | |"
                )
        for note in o.notes:
            lines.append(f"| {o.name} | note: {note.replace('|', '/')} | | | | | |")
    lines += ["", f"Targets met: {met}; missed: {missed}."]
    head = [
        "# Benchmarks (bench/run_all.py, quick mode)",
        "",
        f"{os.cpu_count()} CPUs; whole run {total:.0f} s; {started_load} at start, "
        f"{format_load()} at the end.",
        "",
    ]
    return "\n".join(head + issue_17(outcomes) + lines) + "\n"


def issue_17(outcomes: list[Outcome]) -> list[str]:
    """Issue #17's own targets first, each with its anchor and the load
    average around the bench that measured it."""
    rows = [
        "## Issue #17 targets",
        "",
        "| figure | value | target | anchor | met | bench (load before → after) |",
        "|---|---:|---|---|---|---|",
    ]
    for o in outcomes:
        for f in o.figures:
            if f.get("source") != "#17":
                continue
            verdict = {True: "met", False: "**MISSED**", None: "?"}[f.get("met")]
            rows.append(
                f"| {str(f.get('name', '')).replace('|', '/')} "
                f"| {number(float(f['value']))} {f.get('unit') or ''} | {f.get('target') or ''} "
                f"| {f.get('anchor') or ''} | {verdict} "
                f"| {o.name} ({loads(o.load_before)} → {loads(o.load_after)}) |"
            )
    missing = [o.name for o in outcomes if not o.figures]
    if missing:
        rows.append(f"| *no figures from: {', '.join(missing)}* | | | | | |")
    return [*rows, "", "## Every figure", ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=None, help="also write the table here")
    parser.add_argument("--only", default=None, help="comma-separated bench names")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for the whole run")
    parser.add_argument("--logs", type=Path, default=None, help="keep logs and JSON here")
    args = parser.parse_args()
    chosen = BENCHES
    if args.only:
        wanted = set(args.only.split(","))
        chosen = [b for b in BENCHES if b[0] in wanted]
    started = time.perf_counter()
    started_load = format_load()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="bench-run-all-") as tmp:
        out_dir = args.logs or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, script, bound, *rest in chosen:
            extra: tuple[str, ...] = rest[0] if rest else ()
            path = HERE / script
            left = args.budget - (time.perf_counter() - started)
            if not path.exists():
                outcomes.append(Outcome(name, f"skipped: {script} is absent"))
                continue
            if left < 10:
                outcomes.append(Outcome(name, "skipped: the run's time budget is spent"))
                continue
            limit = min(bound, left)
            shown = " ".join((script, "--quick", *extra))
            print(f"running {shown} (bound {limit:.0f} s; {format_load()})", flush=True)
            outcome = run_bench(name, path, limit, out_dir, extra)
            print(f"  {outcome.status} in {outcome.seconds:.1f} s", flush=True)
            outcomes.append(outcome)
        text = table(outcomes, time.perf_counter() - started, started_load)
    print()
    print(text, end="")
    if args.output is not None:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
