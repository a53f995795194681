"""age-v1 benchmark (issue #17, deliverable 4): our age against pyrage, the
cost of age-v1 prepare against bare seals, and the worker processes' scaling.

Three parts, each interleaved (A B A B …) with medians and the median of the
per-pair ratios, the load average and the process tree's peak memory beside:

* ``pyrage`` — for 1 KiB to 1 and to 10 recipients and a 1 MiB blob to one:
  our :mod:`wire.age_format` encrypt/decrypt against ``pyrage`` on the same
  frame bytes, and our full seal/open (frame, age, envelope, context check,
  strict parse) against the same pipeline with pyrage doing the age step.
  Targets: profile seal ≤ 1.2× pyrage (#17); the others ≤ 1.3× (1 MiB:
  1.5×) as in issue #3.
* ``prepare`` — ``sync_prepare_push`` of 1,000 new messages, age-v1 to one
  recipient, in a store with a synced history of 10,000 messages (and of
  1,000,000 with ``--large-store``, built as ``bench_sync`` builds it), beside
  1,000 bare ``wire.profiles.seal`` calls. Target ≤ 1.2× (#17).
* ``workers`` — sealing and opening one batch of age-v1 messages in-process
  and on the engine's worker pool (:mod:`syncengine.engine.workers`) with 1,
  2 and 4 worker processes, pools started once and warmed; the figures are
  messages per second and the per-pair speed-up over in-process. The issue's
  aim: every core used for large batches (no number), so these are reported.

Run: ``.venv/bin/python bench/bench_age.py [--quick] [--json PATH]
[--parts pyrage,prepare,workers] [--large-store] [--batch N]``.
"""

from __future__ import annotations

import argparse
import hmac
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyrage
from _common import (
    Figure,
    Report,
    TreeMemorySampler,
    add_common_arguments,
    calls_for,
    format_load,
    interleaved,
    per_call,
    process_tree,
    summarize,
)

from syncengine.engine.state import ConnectionRecord
from syncengine.engine.workers import Workers
from syncengine.ids import new_uuid7
from syncengine.ops.bindings import BindingKey
from syncengine.ops.prepare_push import LocalMessage, Sealed, seal_local
from syncengine.ops.sync_records import SyncPrepare
from wire import age_format
from wire.age_frame import build_context, encode_frame, split_frame
from wire.age_keys import X25519Identity
from wire.envelope import Envelope
from wire.message import Message
from wire.outcome import Importable
from wire.profiles import Binding, OpenContext, SealParams, open_envelope, seal

TEAM = "018f3f7e-0000-7000-8000-000000000001"
WIRE = "550e8400-e29b-41d4-a716-446655440000"
BINDING = Binding(TEAM, WIRE, 1)
AT = "2026-01-01T00:00:00.000000Z"


# -- part 1: against pyrage --------------------------------------------------------


def pyrage_case(
    report: Report, label: str, body_size: int, recipients: int, rounds: int, sample_s: float
) -> None:
    message = Message("x" * body_size, "2026-07-20T06:30:00.000000Z", "leader", "worker-1")
    identities = [X25519Identity.generate() for _ in range(recipients)]
    reader = identities[-1]  # the reader's stanza is last: the worst case for both
    strings = tuple(i.recipient.to_string() for i in identities)
    params = SealParams(binding=BINDING, key_id="epoch-1", recipients=strings)
    ctx = OpenContext(binding=BINDING, trusted_key_id="epoch-1", identities={"epoch-1": reader})
    frame = encode_frame(build_context(1, TEAM, WIRE, "age-v1", "epoch-1"), message.to_jcs())
    their_recipients = [pyrage.x25519.Recipient.from_str(s) for s in strings]
    their_identity = pyrage.x25519.Identity.from_str(reader.to_secret_string())
    our_recipients = [i.recipient for i in identities]

    def pyrage_seal() -> Envelope:
        # The same pipeline as ours, with pyrage doing the age step.
        bound = build_context(1, TEAM, WIRE, "age-v1", "epoch-1")
        framed = encode_frame(bound, message.to_jcs())
        return Envelope.from_blob_bytes(
            "age-v1", "epoch-1", pyrage.encrypt(framed, their_recipients)
        )

    def pyrage_open(envelope: Envelope) -> Importable:
        received, body = split_frame(pyrage.decrypt(envelope.blob_bytes(), [their_identity]))
        expected = build_context(1, TEAM, WIRE, envelope.cipher, "epoch-1")
        assert hmac.compare_digest(received, expected)
        return Importable(Message.from_jcs(body))

    sealed = seal(message, "age-v1", params)
    theirs = pyrage_seal()
    assert open_envelope(sealed, ctx) == Importable(message)
    assert open_envelope(theirs, ctx) == Importable(message)
    assert pyrage_open(sealed) == Importable(message)
    ours_file = age_format.encrypt(frame, our_recipients)
    their_file = pyrage.encrypt(frame, their_recipients)

    old_target = "<= 1.5" if body_size > 100_000 else "<= 1.3"
    pairs: list[tuple[str, Callable[[], object], Callable[[], object], str, str]] = [
        (
            "age encrypt",
            lambda: age_format.encrypt(frame, our_recipients),
            lambda: pyrage.encrypt(frame, their_recipients),
            old_target,
            "#3",
        ),
        (
            "age decrypt",
            lambda: age_format.decrypt(ours_file, reader),
            lambda: pyrage.decrypt(their_file, [their_identity]),
            old_target,
            "#3",
        ),
        ("profile seal", lambda: seal(message, "age-v1", params), pyrage_seal, "<= 1.2", "#17"),
        (
            "profile open",
            lambda: open_envelope(sealed, ctx),
            lambda: pyrage_open(theirs),
            old_target,
            "#3",
        ),
    ]
    for name, ours, other, target, source in pairs:
        sides = {
            "ours": per_call(ours, calls_for(ours, sample_s)),
            "pyrage": per_call(other, calls_for(other, sample_s)),
        }
        samples = interleaved(sides, rounds)
        pair = summarize(samples["ours"], samples["pyrage"])
        report.add(
            Figure(
                f"age-v1 {name}, {label}: ours/pyrage",
                pair.ratio,
                "x",
                target=target,
                anchor="pyrage",
                source=source,
                detail=(
                    f"ours {pair.a * 1e6:.1f} us, pyrage {pair.b * 1e6:.1f} us median; "
                    f"per-pair ratio {pair.ratio_min:.2f}-{pair.ratio_max:.2f} over {pair.pairs}"
                ),
            )
        )
        print(
            f"    ours {pair.a * 1e6:9.1f} us  pyrage {pair.b * 1e6:9.1f} us  "
            f"(per-pair {pair.ratio_min:.2f}-{pair.ratio_max:.2f}, {pair.pairs} pairs)"
        )


def part_pyrage(report: Report, quick: bool) -> None:
    rounds, sample_s = (9, 0.01) if quick else (21, 0.03)
    print(f"\n[pyrage] {rounds} interleaved pairs per figure; {format_load()}")
    cases = (
        ("1 KiB, 1 recipient", 1024, 1),
        ("1 KiB, 10 recipients", 1024, 10),
        ("1 MiB blob, 1 recipient", 1_000_000, 1),
    )
    for label, size, count in cases:
        pyrage_case(report, label, size, count, rounds, sample_s)


# -- part 2: age-v1 prepare against bare seals -------------------------------------


def part_prepare(report: Report, quick: bool, sizes: list[int]) -> None:
    from bench_sync import Bench, bare_seals, build

    rounds = 5 if quick else 9
    identity = X25519Identity.generate()
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            key = BindingKey("bench", new_uuid7(), new_uuid7(), 1)
            started = time.perf_counter()
            store = build(Path(tmp) / f"s{size}.db", size, key)
            built = time.perf_counter() - started
            print(
                f"\n[prepare] built {size:,}-message store in {built:.1f} s; "
                f"{rounds} interleaved pairs; {format_load()}"
            )
            bench = Bench(store, key, identity)
            bare = bare_seals(identity, key.remote_team_id)

            def prepare_side(bench: Bench = bench) -> float:
                run = bench.prepare_age()  # sends 1,000 and acks the last round, untimed
                started = time.perf_counter()
                run()
                return time.perf_counter() - started

            def bare_side(bare: Callable[[], object] = bare) -> float:
                started = time.perf_counter()
                bare()
                return time.perf_counter() - started

            samples = interleaved({"prepare": prepare_side, "bare": bare_side}, rounds)
            pair = summarize(samples["prepare"], samples["bare"])
            report.add(
                Figure(
                    f"age-v1 prepare of 1,000 / 1,000 bare seals @ {size:,}",
                    pair.ratio,
                    "x",
                    target="<= 1.2",
                    anchor="bare wire.profiles.seal",
                    source="#17",
                    detail=(
                        f"prepare {pair.a * 1000:.1f} ms, bare seals {pair.b * 1000:.1f} ms median;"
                        f" per-pair {pair.ratio_min:.2f}-{pair.ratio_max:.2f} over {pair.pairs}"
                    ),
                )
            )
            print(
                f"    prepare {pair.a * 1000:8.1f} ms  bare seals {pair.b * 1000:8.1f} ms  "
                f"(per-pair {pair.ratio_min:.2f}-{pair.ratio_max:.2f})"
            )
            store.close()


# -- part 3: worker processes ------------------------------------------------------


def connection_record(key: BindingKey, recipient: str, identity_path: Path) -> ConnectionRecord:
    """A connection as the engine loads it, with one epoch (this machine's
    identity installed); the only place the bench builds an engine record."""
    from syncengine.engine.epochs import EpochHistory, KeyEpoch

    epoch = KeyEpoch(0, 1, "epoch-1", (recipient,), str(identity_path))
    return ConnectionRecord(
        binding_pk=1,
        local_team=key.local_team,
        endpoint="http://127.0.0.1:9",
        server_instance_id=key.server_instance_id,
        remote_team_id=key.remote_team_id,
        protocol_version=key.protocol_version,
        remote_team_name="bench",
        credential_id="unused",
        credential_path=str(identity_path.with_name("unused")),
        connected_at=AT,
        epochs=EpochHistory((epoch,)),
    )


def part_workers(report: Report, quick: bool, batch: int, sampler: TreeMemorySampler) -> None:
    rounds = 3 if quick else 7
    counts = (1, 2, 4)
    identity = X25519Identity.generate()
    recipient = identity.recipient.to_string()
    request = SyncPrepare(1, "age-v1", "epoch-1", (recipient,), 1024 * 1024, True)
    key = BindingKey("bench", new_uuid7(), new_uuid7(), 1)
    with tempfile.TemporaryDirectory() as tmp:
        identity_path = Path(tmp) / "identity.key"
        # Created private from the start: the secret never sits in a readable file.
        fd = os.open(identity_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(identity.to_secret_string() + "\n")
        connection = connection_record(key, recipient, identity_path)
        messages = [
            LocalMessage(n, f"m-{n}", f"worker batch message {n} " + "x" * 80, AT, "alice", "bob")
            for n in range(1, batch + 1)
        ]
        sealed = [seal_local(m, request, key) for m in messages]
        # (envelope, wire ID, sequence, allowed ciphers), as the engine hands them over.
        items = [
            (s.envelope, s.wire_id, seq, frozenset({"age-v1"}))
            for seq, s in enumerate(sealed, start=1)
            if isinstance(s, Sealed)
        ]
        assert len(items) == batch

        def in_process_seal() -> object:
            return [seal_local(m, request, key) for m in messages]

        def in_process_open() -> object:
            from syncengine.engine.evaluation import judge

            def lookup(key_id: str) -> object:
                return identity

            verdicts = [judge(e, w, q, a, connection, lookup) for e, w, q, a in items]
            assert all(v[0] == "importable" for v in verdicts)
            return verdicts

        pools: dict[int, Workers] = {}
        before = set(process_tree(os.getpid()))
        started = time.perf_counter()
        for count in counts:
            pool = Workers(connection, count)
            assert pool.seal(messages[:50], request, key) is not None  # starts and warms it
            pools[count] = pool
            now = set(process_tree(os.getpid()))
            sampler.watch(f"worker pool of {count}", *sorted(now - before))
            before = now
        print(
            f"\n[workers] {batch:,}-message batches, pools of {counts} started in "
            f"{time.perf_counter() - started:.1f} s; {rounds} interleaved rounds; "
            f"{os.cpu_count()} CPUs; {format_load()}"
        )

        # CPU time of this (the engine's) process per batch, all its threads:
        # what handing the work out and taking the results back costs it.
        engine_cpu: dict[str, list[float]] = {}

        def timed(name: str, func: Callable[[], object]) -> Callable[[], float]:
            def side() -> float:
                cpu, started = time.process_time(), time.perf_counter()
                func()
                wall = time.perf_counter() - started
                engine_cpu.setdefault(name, []).append(time.process_time() - cpu)
                return wall

            return side

        def pool_seal(pool: Workers) -> Callable[[], object]:
            def run() -> object:
                result = pool.seal(messages, request, key)
                assert result is not None and len(result) == batch
                return result

            return run

        def pool_open(pool: Workers) -> Callable[[], object]:
            def run() -> object:
                result = pool.judge(items)()
                assert result is not None and all(v[0] == "importable" for v in result)
                return result

            return run

        for job, local, remote in (
            ("seal", in_process_seal, pool_seal),
            ("open", in_process_open, pool_open),
        ):
            engine_cpu.clear()
            sides = {"in-process": timed("in-process", local)}
            sides.update({f"{c} workers": timed(f"{c} workers", remote(pools[c])) for c in counts})
            samples = interleaved(sides, rounds)
            base = samples["in-process"]
            rate = batch / summarize(base, base).a
            report.add(Figure(f"age-v1 {job} in-process, {batch:,} batch", rate, "msg/s"))
            for count in counts:
                pair = summarize(base, samples[f"{count} workers"])
                report.add(
                    Figure(
                        f"age-v1 {job} on {count} worker(s): speed-up over in-process",
                        pair.ratio,
                        "x",
                        anchor="in-process",
                        detail=(
                            f"{batch / pair.b:,.0f} msg/s; per-pair "
                            f"{pair.ratio_min:.2f}-{pair.ratio_max:.2f} over {pair.pairs}"
                        ),
                    )
                )
                # [1:]: the dropped warm-up round
                share = summarize(engine_cpu[f"{count} workers"][1:], engine_cpu["in-process"][1:])
                report.add(
                    Figure(
                        f"age-v1 {job} on {count} worker(s): engine-process CPU / in-process CPU",
                        share.ratio,
                        "x",
                        anchor="in-process",
                        detail="the engine's own share; 1/this bounds the speed-up",
                    )
                )
                print(f"    {count} worker(s): {batch / pair.b:,.0f} msg/s")
        for pool in pools.values():
            pool.close()
    # The first pool's processes include multiprocessing's resource tracker.
    for count in counts:
        report.add_memory(
            f"worker pool of {count} (workers only)", sampler.group(f"worker pool of {count}")
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    parser.add_argument("--parts", default="pyrage,prepare,workers")
    parser.add_argument(
        "--large-store",
        action="store_true",
        help="also measure prepare in a 1,000,000-message store (slow to build)",
    )
    parser.add_argument("--batch", type=int, default=None, help="worker batch (8,000; quick 2,000)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    unknown = parts - {"pyrage", "prepare", "workers"}
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}")
    report = Report("age", args.quick)
    print(f"bench_age{' (quick)' if args.quick else ''}: {format_load()}")
    with TreeMemorySampler(interval=0.2) as sampler:
        if "pyrage" in parts:
            part_pyrage(report, args.quick)
        if "prepare" in parts:
            sizes = [10_000, 1_000_000] if args.large_store else [10_000]
            part_prepare(report, args.quick, sizes)
        if "workers" in parts:
            batch = args.batch or (2_000 if args.quick else 8_000)
            try:
                part_workers(report, args.quick, batch, sampler)
            except Exception as exc:  # the engine's internals move; say so, keep the rest
                report.note(f"workers part failed: {type(exc).__name__}: {exc}")
    report.add_memory("whole process tree (bench + every pool)", sampler.peak)
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
