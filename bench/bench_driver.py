"""The storage driver as a host calls it: ``storage_send`` and
``storage_list_unread`` through the sourced bash file, beside the same calls
through the Python API and a bare ``python -c pass``, in one run.

A host (agmsg core) sources the driver file and calls one function per
operation, so every bash-file call starts a Python process; the figure that
matters is how much a call costs on top of a bare interpreter start. Rounds
interleave the sides (bash send, API send, bare, bash list, API list, …) so
the machine's noise falls on all of them alike; each figure is the median of
the rounds' per-call times, and each ratio is taken per round, then the
median reported.

Targets (issue #11): each bash-file call within 60 ms of a bare
``python -c pass``. The bundled sqlite3-CLI driver was measured through a
host at 46.5 ms per send (not reproduced here: its code is not ours).

    .venv/bin/python bench/bench_driver.py [--calls 1000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from syncengine.cli.driver import driver_file  # noqa: E402
from syncengine.store import Store  # noqa: E402

BIN_DIR = Path(sys.executable).parent


def _bash_loop(store: Path, body: str, calls: int) -> float:
    """Seconds per call of ``body`` run ``calls`` times in one sourced shell."""
    script = f'source "{driver_file()}"\nfor ((i = 0; i < {calls}; i++)); do {body}; done'
    env = dict(os.environ, SYNCENGINE_STORE=str(store), PATH=f"{BIN_DIR}:/usr/bin:/bin")
    start = time.perf_counter()
    subprocess.run(["bash", "--norc", "-c", script], check=True, env=env, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) / calls


def _api_loop(action: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        action()
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per operation and side")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    args = parser.parse_args()
    per_round = max(1, args.calls // args.rounds)
    figures: dict[str, list[float]] = {
        k: [] for k in ("bare", "bash send", "api send", "bash list", "api list")
    }
    with tempfile.TemporaryDirectory() as tmp:
        bash_store, api_store = Path(tmp) / "bash.db", Path(tmp) / "api.db"
        api = Store(api_store)
        for _ in range(args.rounds):
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
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"load average {os.getloadavg()}; {args.rounds} rounds x {per_round} calls per side")
    for name, values in figures.items():
        print(f"  {name:10s} median {statistics.median(values) * 1000:8.2f} ms/call")
    for op in ("send", "list"):
        over = [b - z for b, z in zip(figures[f"bash {op}"], figures["bare"], strict=True)]
        ratio = [b / a for b, a in zip(figures[f"bash {op}"], figures[f"api {op}"], strict=True)]
        print(
            f"  bash {op}: {statistics.median(over) * 1000:6.1f} ms over a bare python start "
            f"(target < 60); {statistics.median(ratio):7.1f}x the in-process API call"
        )
    print(f"peak RSS: this process {own:.0f} MB, largest child process {children:.0f} MB")


if __name__ == "__main__":
    main()
