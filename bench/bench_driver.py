"""The storage driver as a host calls it: ``storage_send`` and
``storage_list_unread`` through the sourced bash file — answered by the
driver server (``served``) and with every call its own process
(``process``) — beside a stand-in of the bundled sqlite3-CLI driver's
per-call work (``bench/bundled_standin.sh``), the same calls through the
Python API and a bare ``python -c pass``, in one run.

Rounds interleave every side (bare, served send, process send, stand-in
send, API send, then the same for list …) so the machine's noise falls on
all of them alike; each figure is the median of the rounds' per-call
times, and each ratio is taken per round, then its median reported, with
the load average beside, and peak memory of the whole process tree (bench,
bash and every process it starts) plus, separately, the detached driver
server.

Targets (issue #11): each bash-file call within 60 ms of a bare ``python -c
pass``, and a host's sequence of sends plus reads no slower than with the
bundled driver (served send + list per call over stand-in send + list,
<= 1.0). The stand-in does less than the bundled driver (no host, no
busy-timeout wrapper), so it is a lower bound of the bundled driver's cost.

    .venv/bin/python bench/bench_driver.py [--quick] [--json PATH] [--calls 1000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import signal
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

from syncengine.cli.driver.command import driver_file  # noqa: E402
from syncengine.cli.driver.rendezvous import read_rendezvous  # noqa: E402
from syncengine.local_store import Store  # noqa: E402

BIN_DIR = Path(sys.executable).parent


STANDIN = REPO / "bench" / "bundled_standin.sh"


def _bash_loop(
    store: Path, body: str, calls: int, *, server: bool = False, standin: bool = False
) -> float:
    """Seconds per call of ``body`` run ``calls`` times in one sourced shell."""
    prelude = f'source "{STANDIN}"' if standin else f'source "{driver_file()}"'
    script = f"{prelude}\nfor ((i = 0; i < {calls}; i++)); do {body}; done"
    # As installed: compiled bytecode is written once and used after (this
    # workplace sets PYTHONDONTWRITEBYTECODE, which would recompile every start).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(
        SYNCENGINE_STORE=str(store),
        STANDIN_DB=str(store),
        PATH=f"{BIN_DIR}:/usr/bin:/bin",
        SYNCENGINE_DRIVER_SERVER="1" if server else "0",
        SYNCENGINE_DRIVER_SERVER_IDLE="300",
    )
    start = time.perf_counter()
    subprocess.run(["bash", "--norc", "-c", script], check=True, env=env, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) / calls


def _start_server(store: Path) -> int:
    """One served call (it runs as a process and starts the server), then
    the server's pid once it has published itself."""
    _bash_loop(store, "storage_send crew alice bob warm-up >/dev/null", 1, server=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = read_rendezvous(f"{store}.serve")
        if found is not None:
            return found.pid
        time.sleep(0.05)
    raise RuntimeError("the driver server did not start")


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
    sides = ("served", "process", "standin", "api")
    figures: dict[str, list[float]] = {"bare": []}
    for op in ("send", "list"):
        figures.update({f"{side} {op}": [] for side in sides})
    send = 'storage_send crew alice bob "hello $i" >/dev/null'
    listing = "storage_list_unread crew bob --limit 20 >/dev/null"
    with TreeMemorySampler(interval=0.1) as sampler, tempfile.TemporaryDirectory() as tmp:
        served_store, process_store = Path(tmp) / "served.db", Path(tmp) / "process.db"
        standin_store, api_store = Path(tmp) / "standin.db", Path(tmp) / "api.db"
        subprocess.run(
            ["bash", "-c", f'source "{STANDIN}"; standin_init'],
            check=True,
            env=dict(os.environ, STANDIN_DB=str(standin_store)),
        )
        sampler.adopt("driver server", _start_server(served_store))
        api = Store(api_store)
        for _ in range(rounds):
            figures["bare"].append(
                _bash_loop(process_store, f'"{sys.executable}" -c pass', per_round)
            )
            for op, body in (("send", send), ("list", listing)):
                figures[f"served {op}"].append(
                    _bash_loop(served_store, body, per_round, server=True)
                )
                figures[f"process {op}"].append(_bash_loop(process_store, body, per_round))
                figures[f"standin {op}"].append(
                    _bash_loop(
                        standin_store,
                        body.replace("storage_", "standin_"),
                        per_round,
                        standin=True,
                    )
                )
                if op == "send":
                    figures["api send"].append(
                        _api_loop(lambda: api.send("crew", "alice", "bob", "hello"), per_round)
                    )
                else:
                    figures["api list"].append(
                        _api_loop(lambda: api.list_unread("crew", "bob", 20), per_round)
                    )
        api.close()
        stop = read_rendezvous(f"{served_store}.serve")
        if stop is not None:
            os.kill(stop.pid, signal.SIGTERM)
    for name, values in figures.items():
        print(f"  {name:13s} median {statistics.median(values) * 1000:8.2f} ms/call")
    report.add(Figure("bare python -c pass", statistics.median(figures["bare"]) * 1000, "ms"))

    def per_round_median(ratio: Callable[[int], float]) -> float:
        return statistics.median(ratio(i) for i in range(rounds))

    # The target is for the calls a host makes once its store's server runs;
    # the process side (a store's first call, or the server turned off) is
    # reported beside it, untargeted.
    for side in ("served", "process"):
        for op in ("send", "list"):
            calls_of = figures[f"{side} {op}"]

            def over_bare(i: int, c: list[float] = calls_of) -> float:
                return c[i] - figures["bare"][i]

            report.add(
                Figure(
                    f"bash-file storage_{op} ({side}) over a bare python start",
                    per_round_median(over_bare) * 1000,
                    "ms",
                    target="< 60" if side == "served" else None,
                    anchor="python -c pass",
                    source="#11" if side == "served" else None,
                )
            )
    for op in ("send", "list"):
        served_of, standin_of = figures[f"served {op}"], figures[f"standin {op}"]

        def served_over_standin(
            i: int, a: list[float] = served_of, b: list[float] = standin_of
        ) -> float:
            return a[i] / b[i]

        report.add(
            Figure(
                f"bash-file storage_{op} (served) / bundled stand-in",
                per_round_median(served_over_standin),
                "x",
                anchor="bundled sqlite3-CLI driver stand-in",
                detail=f"stand-in {statistics.median(standin_of) * 1000:.2f} ms/call",
            )
        )
    report.add(
        Figure(
            "host sequence send + list_unread (served) / bundled stand-in",
            per_round_median(
                lambda i: (
                    (figures["served send"][i] + figures["served list"][i])
                    / (figures["standin send"][i] + figures["standin list"][i])
                )
            ),
            "x",
            target="<= 1.0",
            anchor="bundled sqlite3-CLI driver stand-in",
            source="#11",
        )
    )
    report.add_memory("driver server (detached)", sampler.group("driver server"))
    report.add_memory(
        "whole process tree (bench + bash + python processes + driver server)", sampler.peak
    )
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
