"""The storage driver as a host calls it: ``storage_send`` and
``storage_list_unread`` through the sourced bash file, beside the same calls
through the Python API and a bare ``python -c pass``, in one run.

A host (agmsg core) sources the driver file and calls one function per
operation, so every bash-file call starts a Python process; the figure that
matters is how much a call costs on top of a bare interpreter start. Rounds
interleave the sides (bash send, API send, bare, bash list, API list, …) so
the machine's noise falls on all of them alike; each figure is the median of
the rounds' per-call times, and each ratio is taken per round, then the
median reported, with the load average beside, and peak memory as the
whole process tree (bench, bash, every Python process it starts), sampled.

Targets (issue #11): each bash-file call within 60 ms of a bare
``python -c pass``. The bundled sqlite3-CLI driver was measured through a
host at 46.5 ms per send (not reproduced here: its code is not ours).

    .venv/bin/python bench/bench_driver.py [--quick] [--json PATH] [--calls 1000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _common import (  # noqa: E402
    Figure,
    Report,
    TreeMemorySampler,
    add_common_arguments,
    format_load,
)

from syncengine.cli.driver import driver_file  # noqa: E402
from syncengine.store import Store  # noqa: E402

BIN_DIR = Path(sys.executable).parent


def _bash_loop(store: Path, body: str, calls: int) -> float:
    """Seconds per call of ``body`` run ``calls`` times in one sourced shell."""
    script = f'source "{driver_file()}"\nfor ((i = 0; i < {calls}; i++)); do {body}; done'
    # As installed: compiled bytecode is written once and used after (this
    # workplace sets PYTHONDONTWRITEBYTECODE, which would recompile every start).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(SYNCENGINE_STORE=str(store), PATH=f"{BIN_DIR}:/usr/bin:/bin")
    start = time.perf_counter()
    subprocess.run(["bash", "--norc", "-c", script], check=True, env=env, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) / calls


def _api_loop(action: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        action()
    return (time.perf_counter() - start) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    parser.add_argument("--calls", type=int, default=None, help="calls per side (1000; quick 60)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (10; quick 6)")
    args = parser.parse_args()
    calls = args.calls or (60 if args.quick else 1000)
    rounds = args.rounds or (6 if args.quick else 10)
    per_round = max(1, calls // rounds)
    report = Report("driver", args.quick)
    print(f"bench_driver: {rounds} rounds x {per_round} calls per side; {format_load()}")
    figures: dict[str, list[float]] = {
        k: [] for k in ("bare", "bash send", "api send", "bash list", "api list")
    }
    with TreeMemorySampler(interval=0.1) as sampler, tempfile.TemporaryDirectory() as tmp:
        bash_store, api_store = Path(tmp) / "bash.db", Path(tmp) / "api.db"
        api = Store(api_store)
        for _ in range(rounds):
            figures["bash send"].append(
                _bash_loop(
                    bash_store, 'storage_send crew alice bob "hello $i" >/dev/null', per_round
                )
            )
            figures["api send"].append(
                _api_loop(lambda: api.send("crew", "alice", "bob", "hello"), per_round)
            )
            figures["bare"].append(_bash_loop(bash_store, f'"{sys.executable}" -c pass', per_round))
            figures["bash list"].append(
                _bash_loop(
                    bash_store, "storage_list_unread crew bob --limit 20 >/dev/null", per_round
                )
            )
            figures["api list"].append(
                _api_loop(lambda: api.list_unread("crew", "bob", 20), per_round)
            )
        api.close()
    for name, values in figures.items():
        print(f"  {name:10s} median {statistics.median(values) * 1000:8.2f} ms/call")
    report.add(Figure("bare python -c pass", statistics.median(figures["bare"]) * 1000, "ms"))
    for op in ("send", "list"):
        over = [b - z for b, z in zip(figures[f"bash {op}"], figures["bare"], strict=True)]
        ratio = [b / a for b, a in zip(figures[f"bash {op}"], figures[f"api {op}"], strict=True)]
        report.add(
            Figure(
                f"bash-file storage_{op} over a bare python start",
                statistics.median(over) * 1000,
                "ms",
                target="< 60",
                anchor="python -c pass",
                source="#11",
            )
        )
        report.add(
            Figure(f"bash-file storage_{op} / in-process API", statistics.median(ratio), "x")
        )
    report.add_memory("whole process tree (bench + bash + python processes)", sampler.peak)
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
