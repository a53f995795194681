"""Seeded simulation: three machines, one fake relay, faults of every kind
the engine must survive (tests/syncengine/engine/simulation.py describes the
actions and invariants). Each seed is a test of its own so a failure names it;
``scripts/simulate.py --seeds 1 --start SEED --steps STEPS`` replays it with
its step log."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tests.syncengine.engine.simulation import SimulationFailure, run_seed

#: 40 seeds x 250 steps = 10,000 steps per test run (about 60 s on two cores;
#: 20 x 500 took about 100 s, because a longer run's stores and read state
#: grow, and every step checks every store).
SEEDS = range(40)
STEPS = 250

#: The stores live in memory when the machine has a tmpfs: the simulation
#: crashes processes, not disks, so fsync buys it nothing but time.
SHM = Path("/dev/shm")


@pytest.mark.parametrize("seed", SEEDS)
def test_a_seeded_run_keeps_every_invariant_and_converges(seed: int, tmp_path: Path) -> None:
    in_memory = SHM.is_dir() and os.access(SHM, os.W_OK)
    with tempfile.TemporaryDirectory(dir=SHM if in_memory else tmp_path) as root:
        try:
            stats = run_seed(seed, STEPS, Path(root))
        except SimulationFailure as failure:
            pytest.fail(failure.report(), pytrace=False)
    assert stats.steps == STEPS
    assert stats.checks["converged-messages"] == 3
    assert stats.checks["converged-read-state"] == 2
    print(stats.summary().splitlines()[0])
