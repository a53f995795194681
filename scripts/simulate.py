#!/usr/bin/env python3
"""Run the seeded sync simulation over many seeds and print a summary.

    .venv/bin/python scripts/simulate.py --seeds 3 --steps 200 [--start S]

The simulation is the one ``tests/syncengine/engine/test_simulation.py``
runs. A failing seed prints the seed, the failed invariant and the step log;
``--seeds 1 --start SEED --steps STEPS`` reproduces it exactly. Exit status 1
when any seed failed (all seeds still run unless ``--stop``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.syncengine.engine.simulation import RunStats, SimulationFailure, run_seed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10, help="how many seeds (default 10)")
    parser.add_argument("--steps", type=int, default=500, help="steps per seed (default 500)")
    parser.add_argument("--start", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--stop", action="store_true", help="stop at the first failing seed")
    parser.add_argument("--quiet", action="store_true", help="no line per seed")
    args = parser.parse_args(argv)

    total = RunStats()
    failed: list[int] = []
    for seed in range(args.start, args.start + args.seeds):
        try:
            stats = run_seed(seed, args.steps)
        except SimulationFailure as failure:
            failed.append(seed)
            print(f"FAILED seed {seed} (replay: --seeds 1 --start {seed} --steps {args.steps})")
            print(failure.report())
            if args.stop:
                break
            continue
        total.merge(stats)
        if not args.quiet:
            rate = stats.steps / stats.seconds if stats.seconds else 0.0
            print(f"seed {seed}: ok, {stats.steps} steps in {stats.seconds:.2f}s ({rate:.0f}/s)")
    print(total.summary())
    if failed:
        print(f"failed seeds: {' '.join(map(str, failed))}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
