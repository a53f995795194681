"""Start-up cost of the host-facing commands (issue #17, deliverable 1).

A scheduled ``syncengine pull`` (or ``push``, ``sync``) with nothing to do
pays interpreter start, imports, store open, its requests to the relay and
exit on every run, on every machine; an agent host pays ``send``,
``status`` and ``inbox`` on every call. This bench times each of them as a
whole process, the way a timer or a host starts them, interleaved with the
anchors in every round (A B A B …):

* ``python -c pass`` — the interpreter alone (the floor of every command);
* ``python -c "import sqlite3"`` — a second anchor: a bare stdlib import;
* ``python -c "import httpx"`` — the HTTP stack alone, imported as
  ``syncengine`` imports it (its optional CLI stood in for): no idle relay
  command can start faster than this, so each idle side is also reported
  as its difference to it — the part the project's own code costs;
* ``send`` (body on stdin), ``status`` and ``inbox`` on a small store;
* idle ``pull``, ``push`` and ``sync`` against a live relay on 127.0.0.1
  (one connected store, everything already pushed and pulled);
* ``status`` and idle ``pull``, ``push``, ``sync`` once more on a store with
  a deep history (``--history`` messages, 20,000 quick, 100,000 otherwise:
  every one pushed, pulled back as its echo and unread by its recipient),
  reported as the per-round ratio to the same command on the small store:
  an idle scheduled run must not cost more as history grows (#17,
  deliverable 3; target <= 1.2).

Each side is reported as its median wall time, with the median of the
per-round ratio (and difference) to ``python -c pass`` of the same round.
Targets (#17): ``pull``/``push``/``sync`` idle ≤ 150 ms wall; ``send``,
``status``, ``inbox`` within 60 ms of ``python -c pass``. The load average
is printed beside the figures, and each command's CPU time (user + system,
which a loaded machine inflates less than wall time) beside its wall time;
memory is each command's peak RSS
(``ru_maxrss`` of the process from ``wait4``, which also covers any child it
waited for — an idle command starts none).

Bytecode: the commands run with the project's ``.pyc`` files written (the
state of any installed package), not with ``PYTHONDONTWRITEBYTECODE``, under
which every edited module would be compiled again on each start; the
warm-up round writes them.

``--compare DIR`` also runs every ``syncengine`` side with the code of
another checkout (``git archive HEAD wire syncengine relay | tar -x -C DIR``:
the code before a change) first on ``PYTHONPATH``, interleaved in the same
rounds against the same relay, each tree on a store it set up itself, and
reports the per-round ratio work tree / DIR.

    python bench/bench_startup.py [--quick] [--rounds N] [--compare DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from _common import Figure, Report, add_common_arguments, format_load, interleaved

PYTHON = sys.executable
TEAM = "crew"
#: Messages the connected store holds (already pushed): what ``inbox`` lists.
SEED_MESSAGES = 5
#: The targets of issue #17: idle relay commands (wall), host commands (over ``python -c pass``).
RELAY_TARGET_MS = "<= 150"
LOCAL_TARGET_DELTA_MS = "<= 60"
#: Deep history / small store, per command (#17: no cost that grows with history).
HISTORY_TARGET = "<= 1.2"
#: The suffix of a side run on the deep-history store.
DEEP = " [history]"
#: The anchor that imports the HTTP stack and nothing else.
HTTP_STACK = "python -c 'import httpx'"
#: The relay listens on loopback only, on a free port.
LOOPBACK = ("--host", "127.0.0.1", "--port", "0")


def _syncengine() -> list[str]:
    """The console script next to this interpreter (what a host or a timer
    runs), else ``python -m syncengine``."""
    script = Path(PYTHON).with_name("syncengine")
    return [str(script)] if script.exists() else [PYTHON, "-m", "syncengine"]


def _child_env(code: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNCENGINE_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    return env


@dataclass
class Sample:
    """One process: its wall time, CPU time (user + system) and peak resident set."""

    seconds: float
    cpu_seconds: float
    maxrss_kib: int


def run_once(argv: Sequence[str], stdin: bytes = b"", env: dict[str, str] | None = None) -> Sample:
    """Start ``argv``, feed ``stdin``, wait with ``wait4`` (for the rusage);
    a failing command stops the bench with its stderr."""
    started = time.perf_counter()
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    process.stdin.write(stdin)
    process.stdin.close()
    process.stdout.read()
    error = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    process.stdout.close()
    process.stderr.close()
    if process.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv[-3:])} exited {process.returncode}: "
            f"{error.decode(errors='replace')[-800:]}"
        )
    return Sample(elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)


class Relay:
    """``relay serve`` on 127.0.0.1 (a free port) over its own database."""

    def __init__(self, directory: Path) -> None:
        self.db = directory / "relay.db"
        self.env = _child_env()
        self.process: subprocess.Popen[bytes] | None = None
        self.endpoint = ""

    def start(self) -> None:
        se = _syncengine()
        init = [*se, "relay", "init", "--db", str(self.db)]
        subprocess.run(init, env=self.env, check=True, capture_output=True)
        self.process = subprocess.Popen(
            [*se, "relay", "serve", "--db", str(self.db), *LOOPBACK, "--no-access-log"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self.env,
        )
        assert self.process.stdout is not None
        ready = json.loads(self.process.stdout.readline())
        self.endpoint = f"http://127.0.0.1:{ready['port']}"

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


class Setup:
    """For one code tree: a store connected to the relay with everything
    pushed and pulled, and a local store for ``send`` (so that ``send``
    never gives the idle ``push`` something to do)."""

    def __init__(
        self, directory: Path, relay: Relay, code: Path | None = None, history: int = 0
    ) -> None:
        self.dir = directory
        self.relay = relay
        self.history = history
        self.store = directory / "a" / "store.db"
        self.local = directory / "local" / "store.db"
        self.env = _child_env(code)
        self.se = _syncengine()

    def cli(self, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> bytes:
        done = subprocess.run(
            [*self.se, *args],
            input=stdin,
            capture_output=True,
            env=self.env if env is None else env,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"syncengine {args[0]} failed: {done.stderr.decode()[-800:]}")
        return done.stdout

    def start(self) -> None:
        self.store.parent.mkdir(parents=True)
        self.local.parent.mkdir(parents=True)
        relay_env = self.relay.env  # the relay's own code operates it
        db = ["--db", str(self.relay.db)]
        store = ["--store", str(self.store)]
        self.cli("team", "create", TEAM, "--member", "alice", "--member", "bob", *store)
        document = self.dir / "team.json"
        self.cli("team", "export-provisioning", TEAM, "--output", str(document), *store)
        self.cli("relay", "team", "apply", str(document), *db, env=relay_env)
        team_id = json.loads(document.read_text())["team_id"]
        # The pairing token goes from the relay CLI's stdout into a 0600 file
        # that ``connect --token @FILE`` reads: never on argv, never printed.
        token = self.dir / "token"
        issued = self.cli("relay", "token", "issue", *db, "--team", team_id, env=relay_env)
        fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as sink:
            sink.write(issued)
        del issued
        self.cli(
            "connect", *store, "--endpoint", self.relay.endpoint, "--token", f"@{token}",
            "--team", TEAM, "--security", "plaintext-allowed",
        )  # fmt: skip
        token.unlink()
        for n in range(SEED_MESSAGES):
            self.cli("send", TEAM, "alice", "bob", "-", *store, stdin=f"seed {n}".encode())
        if self.history:
            self._deepen()
        self.cli("sync", *store)
        local = ["--store", str(self.local)]
        self.cli("team", "create", TEAM, "--member", "alice", "--member", "bob", *local)

    def _deepen(self) -> None:
        """``history`` more messages, written in bulk through the store (a
        host's sends, without a process each), then pushed and pulled back:
        a history of acknowledged pushes and echoes, all unread by bob."""
        from syncengine.local_store import Store
        from syncengine.store import OutgoingMessage

        with Store(self.store) as store:
            for first in range(0, self.history, 1000):
                store.send_many(
                    OutgoingMessage(TEAM, "alice", "bob", f"history {n}")
                    for n in range(first, min(first + 1000, self.history))
                )
        self.cli("push", "--all", "--store", str(self.store))
        self.cli("pull", "--store", str(self.store))

    def sides(self) -> dict[str, tuple[list[str], bytes]]:
        """Command name → (argv, stdin), in the order each round runs them."""
        store = ["--store", str(self.store)]
        if self.history:
            return {
                "status" + DEEP: ([*self.se, "status", *store], b""),
                "pull (idle)" + DEEP: ([*self.se, "pull", *store], b""),
                "push (idle)" + DEEP: ([*self.se, "push", *store], b""),
                "sync (idle)" + DEEP: ([*self.se, "sync", *store], b""),
            }
        return {
            "send": (
                [*self.se, "send", TEAM, "alice", "bob", "-", "--store", str(self.local)],
                b"a message from the start-up bench\n",
            ),
            "status": ([*self.se, "status", *store], b""),
            "inbox": ([*self.se, "inbox", TEAM, "bob", *store], b""),
            "pull (idle)": ([*self.se, "pull", *store], b""),
            "push (idle)": ([*self.se, "push", *store], b""),
            "sync (idle)": ([*self.se, "sync", *store], b""),
        }


ANCHORS: dict[str, tuple[list[str], bytes]] = {
    "python -c pass": ([PYTHON, "-c", "pass"], b""),
    "python -c 'import sqlite3'": ([PYTHON, "-c", "import sqlite3"], b""),
    HTTP_STACK: (
        [PYTHON, "-c", "import syncengine._startup as s; s.skip_httpx_cli(); import httpx"],
        b"",
    ),
}
#: The suffix of a side run with the ``--compare`` tree's code.
BEFORE = " [before]"


def measure(
    setups: Sequence[tuple[str, Setup]], rounds: int, deep: Setup | None = None
) -> dict[str, list[Sample]]:
    """Every side once per round, interleaved (a warm-up round first, dropped).
    With two trees, each command runs work tree then before, side by side;
    a ``deep`` store's command runs right after the same command on the
    small store."""
    kept: dict[str, list[Sample]] = {}
    env = _child_env()

    def side(name: str, argv: list[str], stdin: bytes, env: dict[str, str]) -> Callable[[], float]:
        def sample() -> float:
            got = run_once(argv, stdin, env)
            kept.setdefault(name, []).append(got)
            return got.seconds

        return sample

    sides = {name: side(name, argv, stdin, env) for name, (argv, stdin) in ANCHORS.items()}
    per_tree = [(suffix, setup, setup.sides()) for suffix, setup in setups]
    for command in per_tree[0][2]:
        for suffix, setup, commands in per_tree:
            argv, stdin = commands[command]
            sides[command + suffix] = side(command + suffix, argv, stdin, setup.env)
        if deep is not None and command + DEEP in deep.sides():
            argv, stdin = deep.sides()[command + DEEP]
            sides[command + DEEP] = side(command + DEEP, argv, stdin, deep.env)
    interleaved(sides, rounds, warmup=1)
    return {name: samples[1:] for name, samples in kept.items()}  # the warm-up dropped


def _median_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def _median_delta_ms(a: Sequence[float], b: Sequence[float]) -> float:
    return statistics.median((x - y) * 1000 for x, y in zip(a, b, strict=True))


def report(samples: dict[str, list[Sample]], out: Report) -> None:
    wall = {name: [s.seconds for s in got] for name, got in samples.items()}
    cpu = {name: [s.cpu_seconds for s in got] for name, got in samples.items()}
    bare = wall["python -c pass"]
    print(f"  {format_load()}  ({len(bare)} interleaved rounds; medians)")
    print(
        f"  {'command':<28} {'wall ms':>9} {'x pass':>7} {'+ms vs pass':>12} "
        f"{'cpu ms':>8} {'+cpu ms':>8} {'peak RSS':>10}"
    )
    for name in samples:
        peak = statistics.median(s.maxrss_kib for s in samples[name]) / 1024
        print(
            f"  {name:<28} {statistics.median(wall[name]) * 1000:>9.1f} "
            f"{_median_ratio(wall[name], bare):>7.2f} {_median_delta_ms(wall[name], bare):>12.1f} "
            f"{statistics.median(cpu[name]) * 1000:>8.1f} "
            f"{_median_delta_ms(cpu[name], cpu['python -c pass']):>8.1f} {peak:>6.1f} MiB"
        )
    print()
    for name, values in wall.items():
        if name.endswith(BEFORE):
            continue
        if name.endswith(DEEP):
            small = name.removesuffix(DEEP)
            out.add(
                Figure(
                    f"{small} on a deep history / on a 5-message store",
                    _median_ratio(values, wall[small]),
                    "x",
                    HISTORY_TARGET,
                    anchor=f"{small}, same rounds",
                    source="#17",
                    detail=f"median {statistics.median(values) * 1000:.1f} ms, "
                    f"cpu {statistics.median(cpu[name]) * 1000:.1f} ms",
                )
            )
            continue
        median_ms = statistics.median(values) * 1000
        ratio = _median_ratio(values, bare)
        delta = _median_delta_ms(values, bare)
        cpu_ms = statistics.median(cpu[name]) * 1000
        if name.endswith("(idle)"):
            out.add(
                Figure(
                    f"{name} wall",
                    median_ms,
                    "ms",
                    RELAY_TARGET_MS,
                    source="#17",
                    detail=f"cpu {cpu_ms:.1f} ms; {ratio:.2f}x python -c pass",
                )
            )
            out.add(
                Figure(
                    f"{name} minus the HTTP stack alone",
                    _median_delta_ms(values, wall[HTTP_STACK]),
                    "ms",
                    anchor=HTTP_STACK,
                    detail="what the project's own imports, store and requests add",
                )
            )
        elif name in ("send", "status", "inbox"):
            out.add(
                Figure(
                    f"{name} minus python -c pass",
                    delta,
                    "ms",
                    LOCAL_TARGET_DELTA_MS,
                    anchor="python -c pass",
                    source="#17",
                    detail=f"median {median_ms:.1f} ms, cpu {cpu_ms:.1f} ms, {ratio:.2f}x",
                )
            )
        elif name == "python -c pass":
            out.add(Figure(f"{name} wall", median_ms, "ms"))
        else:
            out.add(Figure(f"{name} minus python -c pass", delta, "ms", anchor="python -c pass"))
        peak = statistics.median(s.maxrss_kib for s in samples[name]) / 1024
        out.add(Figure(f"{name} peak RSS", peak, "MiB"), show=False)
        before = wall.get(name + BEFORE)
        if before is not None:
            out.add(
                Figure(
                    f"{name} / before",
                    _median_ratio(values, before),
                    "x",
                    anchor="the --compare tree, same rounds",
                    detail=f"before median {statistics.median(before) * 1000:.1f} ms",
                )
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    parser.add_argument(
        "--history",
        type=int,
        default=None,
        help="messages of the deep-history store (20,000 quick, 100,000; 0: none)",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        default=None,
        metavar="DIR",
        help="also run each command with the code in DIR (wire/, syncengine/, relay/)",
    )
    args = parser.parse_args(argv)
    rounds = args.rounds or (12 if args.quick else 40)
    history = (20_000 if args.quick else 100_000) if args.history is None else args.history
    out = Report("startup", args.quick)
    print(f"bench_startup: {rounds} rounds, {format_load()}")
    directory = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    relay = Relay(directory)
    try:
        relay.start()
        setups = [("", Setup(directory / "work-tree", relay))]
        if args.compare is not None:
            setups.append((BEFORE, Setup(directory / "before", relay, args.compare.resolve())))
        deep = Setup(directory / "history", relay, history=history) if history else None
        for setup in [s for _, s in setups] + ([deep] if deep is not None else []):
            setup.start()
        samples = measure(setups, rounds, deep)
    finally:
        relay.stop()
        if args.keep:
            print(f"kept {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)
    report(samples, out)
    out.note("bytecode written (no PYTHONDONTWRITEBYTECODE); idle commands start no child")
    if history:
        out.note(f"deep history: {history:,} messages pushed, pulled back and unread")
    return out.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
