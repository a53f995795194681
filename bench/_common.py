"""What every bench shares so that none of them can flatter us (issue #17, 5).

The house rules for a figure:

* the sides a bench compares are measured interleaved, A B A B …, so the
  machine's background load falls on all of them alike (:func:`interleaved`);
* each side is reported as its median, and a comparison as the median of the
  per-pair ratios (:func:`median_ratio`), never best-of-N, which flips under
  load;
* the load average is printed beside the figures (:func:`load_average`);
* peak memory is the whole process tree — the bench, the engine processes it
  starts, their worker processes, the relay — sampled periodically as the
  sum of RSS and of PSS (``/proc/PID/smaps_rollup``), with the sum of each
  process's own high-water mark as an upper bound (:class:`TreeMemorySampler`).

Every bench takes ``--quick`` (a short run for ``bench/run_all.py``) and
``--json PATH``, and writes one :class:`Report` there. The JSON shape, which
``run_all.py`` reads::

    {"bench": "age", "quick": true, "seconds": 41.2,
     "load_before": [1.0, 0.9, 0.8], "load_after": [1.2, 1.0, 0.8],
     "figures": [{"name": "...", "value": 1.07, "unit": "x",
                  "target": "<= 1.2", "anchor": "pyrage", "met": true,
                  "source": "#17"}],
     "memory": {"rss_mb": 80.1, "pss_mb": 60.2, "hwm_sum_mb": 85.0,
                "processes": 3}}

Linux only (``/proc``), like the machines these figures are for.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Figure",
    "MemoryPeak",
    "Pairing",
    "Report",
    "TreeMemorySampler",
    "add_common_arguments",
    "calls_for",
    "format_load",
    "interleaved",
    "judge",
    "load_average",
    "median_ratio",
    "per_call",
    "process_tree",
    "raise_open_files_limit",
    "summarize",
    "tree_cpu_seconds",
    "tree_rss_mb",
]


# -- load --------------------------------------------------------------------------


def load_average() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages."""
    return os.getloadavg()


def format_load(load: Sequence[float] | None = None) -> str:
    values = load_average() if load is None else load
    return "load average " + " ".join(f"{x:.2f}" for x in values)


# -- timing ------------------------------------------------------------------------


def per_call(func: Callable[[], object], number: int) -> Callable[[], float]:
    """A side that calls ``func`` ``number`` times and returns seconds per call."""

    def sample() -> float:
        started = time.perf_counter()
        for _ in range(number):
            func()
        return (time.perf_counter() - started) / number

    return sample


def calls_for(func: Callable[[], object], seconds: float) -> int:
    """How many calls of ``func`` take about ``seconds`` (at least one)."""
    started = time.perf_counter()
    func()
    once = time.perf_counter() - started
    return max(1, int(seconds / max(once, 1e-7)))


def interleaved(
    sides: Mapping[str, Callable[[], float]], rounds: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Run every side once per round, in the given order (A B A B …).

    A side returns the seconds of one sample, so any set-up it needs stays
    outside its own timing. ``warmup`` rounds are run first and dropped.
    """
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for index in range(warmup + rounds):
        for name, side in sides.items():
            seconds = side()
            if index >= warmup:
                samples[name].append(seconds)
    return samples


def median_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> float:
    """The median of the per-pair ratios ``numerators[i] / denominators[i]``."""
    return statistics.median(a / b for a, b in zip(numerators, denominators, strict=True))


@dataclass(frozen=True)
class Pairing:
    """Two interleaved sides: their medians and the per-pair ratio a/b."""

    a: float
    b: float
    ratio: float
    ratio_min: float
    ratio_max: float
    pairs: int


def summarize(a: Sequence[float], b: Sequence[float]) -> Pairing:
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    return Pairing(
        statistics.median(a),
        statistics.median(b),
        statistics.median(ratios),
        min(ratios),
        max(ratios),
        len(ratios),
    )


# -- memory of the whole process tree ----------------------------------------------


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants alive now (``/proc/PID/task/*/children``)."""
    found = [root]
    index = 0
    while index < len(found):
        pid = found[index]
        index += 1
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                text = Path(f"/proc/{pid}/task/{task}/children").read_text()
            except OSError:
                continue
            found.extend(int(child) for child in text.split())
    return found


def _process_memory_kb(pid: int) -> tuple[int, int, int] | None:
    """(RSS, PSS, VmHWM) of one process in KiB, or ``None`` if it is gone."""
    rss = pss = hwm = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
                break
    except (OSError, ValueError):
        return None
    return rss, pss, hwm


def _cpu_ticks(pid: int) -> int | None:
    """utime + stime + cutime + cstime of one process (clock ticks), or ``None``."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15])


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds used so far by ``root`` and its live descendants.

    Each live process counts its own time and that of the children it has
    reaped (``cutime``/``cstime``), so a worker or a PostgreSQL backend that
    exited is still counted, once, under the process that reaped it. Take
    the difference of two readings for the CPU of an interval.
    """
    ticks = 0
    for pid in process_tree(root):
        value = _cpu_ticks(pid)
        if value is not None:
            ticks += value
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_rss_mb(root: int) -> tuple[float, float, int]:
    """(RSS sum, PSS sum, processes) of ``root``'s tree now, in MiB."""
    rss = pss = 0
    count = 0
    for pid in process_tree(root):
        value = _process_memory_kb(pid)
        if value is not None:
            rss += value[0]
            pss += value[1]
            count += 1
    return rss / 1024, pss / 1024, count


def raise_open_files_limit(needed: int) -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` towards ``needed`` (never
    past the hard limit) and return the soft limit now in force.

    Processes started afterwards inherit it, so a bench that starts its
    relays after calling this gives them the same room.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
        soft = ceiling
    return int(soft)


@dataclass
class MemoryPeak:
    """Peaks over the samples of one process tree, in MiB.

    ``rss_mb`` and ``pss_mb`` are the largest sums seen in one sample (RSS
    counts shared pages once per process, PSS splits them); ``hwm_sum_mb``
    sums each process's own high-water mark (``VmHWM``), an upper bound that
    also covers peaks between samples; ``processes`` is the most processes
    alive at once.
    """

    rss_mb: float = 0.0
    pss_mb: float = 0.0
    hwm_sum_mb: float = 0.0
    processes: int = 0
    samples: int = 0

    def add(self, memory: Mapping[int, tuple[int, int, int]]) -> None:
        self.samples += 1
        self.rss_mb = max(self.rss_mb, sum(m[0] for m in memory.values()) / 1024)
        self.pss_mb = max(self.pss_mb, sum(m[1] for m in memory.values()) / 1024)
        self.processes = max(self.processes, len(memory))
        self.hwm_sum_mb = max(self.hwm_sum_mb, sum(m[2] for m in memory.values()) / 1024)

    def as_dict(self) -> dict[str, float | int]:
        return {
            "rss_mb": round(self.rss_mb, 1),
            "pss_mb": round(self.pss_mb, 1),
            "hwm_sum_mb": round(self.hwm_sum_mb, 1),
            "processes": self.processes,
            "samples": self.samples,
        }

    def line(self) -> str:
        return (
            f"RSS sum {self.rss_mb:.1f} MiB, PSS sum {self.pss_mb:.1f} MiB, "
            f"sum of per-process VmHWM {self.hwm_sum_mb:.1f} MiB, "
            f"up to {self.processes} processes ({self.samples} samples)"
        )


class TreeMemorySampler:
    """Samples the memory of a process tree on a background thread.

    The tree is ``root`` (default: this process) and every descendant at the
    moment of each sample. :meth:`watch` names subtrees (an engine process
    and its workers, the relay) whose own peak is tracked as well; a watched
    pid stays counted under its name after it exits. Use as a context manager;
    the sampling thread only reads ``/proc`` and sleeps between samples.
    """

    def __init__(self, root: int | None = None, interval: float = 0.1) -> None:
        self.root = os.getpid() if root is None else root
        self.interval = interval
        self.peak = MemoryPeak()
        self._groups: dict[str, tuple[tuple[int, ...], MemoryPeak]] = {}
        self._adopted: list[int] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, name: str, *pids: int) -> None:
        """Track the subtrees of ``pids`` together under ``name``; watching
        the same name again adds to the same peak (a later engine process)."""
        with self._lock:
            previous = self._groups.get(name)
            self._groups[name] = (tuple(pids), previous[1] if previous else MemoryPeak())
        self.sample()

    def group(self, name: str) -> MemoryPeak:
        with self._lock:
            entry = self._groups.get(name)
        return entry[1] if entry else MemoryPeak()

    def adopt(self, name: str, pid: int) -> None:
        """Count a process outside the tree — a detached one this run started
        (the driver server) — in the total and under ``name``."""
        with self._lock:
            self._adopted.append(pid)
        self.watch(name, pid)

    def sample(self) -> None:
        with self._lock:
            adopted = list(self._adopted)
        pids = process_tree(self.root)
        for pid in adopted:
            pids.extend(p for p in process_tree(pid) if p not in pids)
        memory: dict[int, tuple[int, int, int]] = {}
        for pid in pids:
            value = _process_memory_kb(pid)
            if value is not None:
                memory[pid] = value
        with self._lock:
            self.peak.add(memory)
            for roots, peak in self._groups.values():
                tree = {p for root in roots for p in process_tree(root)}
                sub = {p: memory[p] for p in tree if p in memory}
                if sub:
                    peak.add(sub)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> TreeMemorySampler:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="bench-memory", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sample()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


# -- report ------------------------------------------------------------------------


@dataclass
class Figure:
    """One reported figure, with the target it is judged against (if any).

    ``target`` is ``"<= 1.2"`` or ``">= 5000"`` style text; ``met`` is
    computed from it unless given. ``anchor`` names what a ratio is taken
    against (pyrage, bare SQLite, ``python -c pass``); ``source`` the issue
    the target comes from.
    """

    name: str
    value: float
    unit: str
    target: str | None = None
    anchor: str | None = None
    source: str | None = None
    met: bool | None = None
    detail: str | None = None

    def __post_init__(self) -> None:
        if self.met is None and self.target is not None:
            self.met = judge(self.value, self.target)


def judge(value: float, target: str) -> bool | None:
    """Whether ``value`` meets ``"<= x"``, ``"< x"``, ``">= x"`` or ``"> x"``."""
    parts = target.split()
    if len(parts) != 2:
        return None
    op, text = parts
    try:
        bound = float(text.replace(",", ""))
    except ValueError:
        return None
    checks: dict[str, Callable[[float, float], bool]] = {
        "<=": lambda a, b: a <= b,
        "<": lambda a, b: a < b,
        ">=": lambda a, b: a >= b,
        ">": lambda a, b: a > b,
    }
    check = checks.get(op)
    return None if check is None else check(value, bound)


class Report:
    """Figures of one bench run, printed as they come and written as JSON."""

    def __init__(self, bench: str, quick: bool) -> None:
        self.bench = bench
        self.quick = quick
        self.started = time.perf_counter()
        self.load_before = load_average()
        self.figures: list[Figure] = []
        self.memory: dict[str, dict[str, float | int]] = {}
        self.notes: list[str] = []

    def add(self, figure: Figure, show: bool = True) -> Figure:
        self.figures.append(figure)
        if show:
            verdict = ""
            if figure.target is not None:
                verdict = f"  target {figure.target} {_verdict(figure.met)}"
            anchor = f" (vs {figure.anchor})" if figure.anchor else ""
            print(f"  {figure.name}: {_number(figure.value)} {figure.unit}{anchor}{verdict}")
        return figure

    def add_memory(self, name: str, peak: MemoryPeak) -> None:
        self.memory[name] = peak.as_dict()
        print(f"  peak memory, {name}: {peak.line()}")

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  note: {text}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "bench": self.bench,
            "quick": self.quick,
            "seconds": round(time.perf_counter() - self.started, 1),
            "load_before": list(self.load_before),
            "load_after": list(load_average()),
            "figures": [asdict(f) for f in self.figures],
            "memory": self.memory,
            "notes": self.notes,
        }

    def finish(self, json_path: Path | None) -> int:
        """Print the load average after, write the JSON; 0 (figures that miss
        their target are reported, not an error)."""
        data = self.as_dict()
        after = " ".join(f"{x:.2f}" for x in data["load_after"])
        before = " ".join(f"{x:.2f}" for x in self.load_before)
        print(f"load average after {after} (before {before})")
        missed = [f.name for f in self.figures if f.met is False]
        if any(f.target for f in self.figures):
            print("targets missed: " + (", ".join(missed) if missed else "none"))
        if json_path is not None:
            json_path.write_text(json.dumps(data, indent=2) + "\n")
        return 0


def _verdict(met: bool | None) -> str:
    return {True: "met", False: "MISSED", None: "?"}[met]


def _number(value: float) -> str:
    if value != value:  # NaN
        return "nan"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.3g}" if abs(value) < 0.1 else f"{value:.2f}"


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="a short run (what bench/run_all.py uses)"
    )
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write figures")
