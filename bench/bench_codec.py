"""Codec benchmark: each figure a ratio against a bare baseline, measured
interleaved in one run (A B A B …), median of the per-pair ratios.

Targets (issue #2): ``none`` seal+open of a 1 KiB message within 3x of a bare
``json.dumps`` + base64 round trip of the same object and at least 25,000/s
on one core; the envelope digest within 1.5x of ``hashlib.sha256`` over the
same decoded bytes. JCS encodes are reported against ``json.dumps`` without a
target.

Run: ``.venv/bin/python bench/bench_codec.py [--quick] [--json PATH]``
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import sys
from collections.abc import Callable

from _common import (
    Figure,
    Report,
    TreeMemorySampler,
    add_common_arguments,
    calls_for,
    format_load,
    interleaved,
    per_call,
    summarize,
)

from wire import jcs
from wire.envelope import Envelope
from wire.message import Message
from wire.outcome import Importable
from wire.profiles import open_envelope, seal


def message_of(size: int) -> Message:
    return Message("x" * size, "2026-07-20T06:30:00.000000Z", "leader", "worker-1")


def cases() -> list[tuple[str, Callable[[], object], Callable[[], object], str | None, str]]:
    """(name, ours, bare baseline, target, anchor)."""
    out: list[tuple[str, Callable[[], object], Callable[[], object], str | None, str]] = []
    msg = message_of(1024)
    obj = msg.to_obj()

    def bare_jcs() -> bytes:
        return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()

    out.append(
        (
            "JCS encode 1 KiB (jcs.canonicalize)",
            lambda: jcs.canonicalize(obj),
            bare_jcs,
            None,
            "json.dumps",
        )
    )
    out.append(("JCS encode 1 KiB (Message.to_jcs)", msg.to_jcs, bare_jcs, None, "json.dumps"))
    for size, label, target in ((1024, "1 KiB", "<= 3"), (100 * 1024, "100 KiB", None)):
        message = message_of(size)
        plain = message.to_obj()

        def ours_round_trip(message: Message = message) -> None:
            outcome = open_envelope(seal(message, "none"))
            assert isinstance(outcome, Importable)

        def bare_round_trip(plain: dict[str, str] = plain) -> None:
            blob = base64.b64encode(json.dumps(plain, separators=(",", ":")).encode())
            json.loads(base64.b64decode(blob))

        out.append(
            (
                f"none seal+open {label}",
                ours_round_trip,
                bare_round_trip,
                target,
                "json+base64 round trip",
            )
        )
    for size, label in ((1024, "1 KiB"), (1024 * 1024, "1 MiB")):
        data = os.urandom(size)
        envelope = Envelope.from_blob_bytes("none", None, data)
        out.append(
            (
                f"envelope digest {label}",
                envelope.digest,
                lambda data=data: hashlib.sha256(data).digest(),  # type: ignore[misc]
                "<= 1.5",
                "hashlib.sha256",
            )
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    args = parser.parse_args()
    rounds, sample_s = (15, 0.01) if args.quick else (31, 0.03)
    report = Report("codec", args.quick)
    print(f"bench_codec: {rounds} interleaved pairs per figure; {format_load()}")
    with TreeMemorySampler(interval=0.5) as sampler:
        for name, ours, bare, target, anchor in cases():
            sides = {
                "ours": per_call(ours, calls_for(ours, sample_s)),
                "bare": per_call(bare, calls_for(bare, sample_s)),
            }
            samples = interleaved(sides, rounds)
            pair = summarize(samples["ours"], samples["bare"])
            report.add(
                Figure(
                    f"{name}: ours/bare",
                    pair.ratio,
                    "x",
                    target=target,
                    anchor=anchor,
                    source="#2" if target else None,
                    detail=f"ours {pair.a * 1e6:.2f} us, bare {pair.b * 1e6:.2f} us median",
                )
            )
            print(
                f"    ours {pair.a * 1e6:10.2f} us  bare {pair.b * 1e6:10.2f} us  "
                f"(per-pair {pair.ratio_min:.2f}-{pair.ratio_max:.2f}, {pair.pairs} pairs)"
            )
            if name == "none seal+open 1 KiB":
                report.add(
                    Figure(
                        "none seal+open 1 KiB per second, one core",
                        1 / pair.a,
                        "/s",
                        target=">= 25000",
                        source="#2",
                    )
                )
    report.add_memory("process tree (one process)", sampler.peak)
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
