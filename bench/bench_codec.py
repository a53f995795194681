"""Codec benchmark: figures as ratios measured side by side in one run.

Targets (issue #2): ``none`` seal+open of a 1 KiB message within 3x of a bare
``json.dumps`` + base64 round trip of the same object and at least 25,000/s
on one core; the envelope digest within 1.5x of ``hashlib.sha256`` over the
same decoded bytes.

Run: ``.venv/bin/python bench/bench_codec.py``
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import timeit
from collections.abc import Callable

from wire import jcs
from wire.envelope import Envelope
from wire.message import Message
from wire.outcome import Importable
from wire.profiles import open_envelope, seal


def best_per_call(func: Callable[[], object], min_time: float = 0.2, repeat: int = 5) -> float:
    """Best-of-``repeat`` seconds per call, each run lasting at least ``min_time``."""
    timer = timeit.Timer(func)
    number, _ = timer.autorange()
    number = max(number, int(number * min_time / 0.2))
    return min(timer.repeat(repeat=repeat, number=number)) / number


def message_of(size: int) -> Message:
    return Message("x" * size, "2026-07-20T06:30:00.000000Z", "leader", "worker-1")


def main() -> None:
    rows: list[tuple[str, float, float]] = []

    msg = message_of(1024)
    obj = msg.to_obj()
    ours = best_per_call(lambda: jcs.canonicalize(obj))
    bare = best_per_call(lambda: json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())
    rows.append(("JCS encode of a 1 KiB message (generic canonicalize)", ours, bare))
    ours = best_per_call(msg.to_jcs)
    rows.append(("JCS encode of a 1 KiB message (Message.to_jcs)", ours, bare))

    for size, label in ((1024, "1 KiB"), (100 * 1024, "100 KiB")):
        msg = message_of(size)
        obj = msg.to_obj()

        def ours_round_trip(msg: Message = msg) -> None:
            outcome = open_envelope(seal(msg, "none"))
            assert isinstance(outcome, Importable)

        def bare_round_trip(obj: dict[str, str] = obj) -> None:
            blob = base64.b64encode(json.dumps(obj, separators=(",", ":")).encode())
            json.loads(base64.b64decode(blob))

        rows.append(
            (
                f"none seal+open, {label} body",
                best_per_call(ours_round_trip),
                best_per_call(bare_round_trip),
            )
        )

    for size, label in ((1024, "1 KiB"), (1024 * 1024, "1 MiB")):
        data = os.urandom(size)
        envelope = Envelope.from_blob_bytes("none", None, data)
        rows.append(
            (
                f"envelope digest, {label} blob",
                best_per_call(envelope.digest),
                best_per_call(lambda data=data: hashlib.sha256(data).digest()),
            )
        )

    print(f"{'case':<55} {'ours':>12} {'baseline':>12} {'ratio':>7}")
    for name, ours, bare in rows:
        print(f"{name:<55} {ours * 1e6:>10.2f}us {bare * 1e6:>10.2f}us {ours / bare:>6.2f}x")
    one_kib = next(r for r in rows if r[0] == "none seal+open, 1 KiB body")
    print(f"\nnone seal+open of a 1 KiB message: {1 / one_kib[1]:,.0f} per second on one core")


if __name__ == "__main__":
    main()
