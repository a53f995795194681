"""``syncengine envelope``: the codec as an operator tool.

Reads JSON Lines on stdin and writes JSON Lines on stdout, one result per
input line, for manual inspection and recovery:

* ``seal``    message object → envelope object
* ``open``    envelope object → message object, or ``{"state", "reason"}``
* ``digest``  envelope object → ``{"digest": hex}`` (the relay's idempotency key)
* ``inspect`` envelope object → what the relay can see: v, cipher, key_id, sizes

Exit codes: 0 every line succeeded; 1 ``open`` left at least one envelope
blocked (its state is printed); 2 an input line is invalid (named on stderr,
processing stops there); 3 the command cannot seal (size limit, keys).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from syncengine.cli.age_options import (
    add_age_open_options,
    add_age_seal_options,
    age_open_context,
    age_seal_params,
)
from syncengine.cli.jsonl import InputError, read_lines, write_record
from wire import jcs
from wire.envelope import Envelope
from wire.errors import ProfileError, WireError
from wire.limits import MAX_BLOB_BYTES
from wire.message import Message
from wire.outcome import Importable
from wire.profiles import OpenContext, SealParams, open_envelope, seal

EXIT_OK = 0
EXIT_BLOCKED = 1
EXIT_INVALID_INPUT = 2
EXIT_CANNOT_SEAL = 3


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "envelope",
        help="seal, open, digest and inspect sealed envelopes (JSON Lines on stdin)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    seal = actions.add_parser("seal", help="message JSON lines -> envelope JSON lines")
    seal.add_argument("--cipher", default="none", help="cipher profile (default: none)")
    seal.add_argument(
        "--max-blob-bytes",
        type=int,
        default=None,
        help="the team's capability max_blob_bytes (default: the 1 MiB protocol maximum)",
    )
    add_seal_options(seal)
    seal.set_defaults(handler=_run_seal)

    open_ = actions.add_parser("open", help="envelope JSON lines -> message JSON lines")
    add_open_options(open_)
    open_.set_defaults(handler=_run_open)

    digest = actions.add_parser("digest", help="envelope JSON lines -> SHA-256 idempotency digest")
    digest.set_defaults(handler=_run_digest)

    inspect = actions.add_parser("inspect", help="envelope JSON lines -> what the relay can see")
    inspect.set_defaults(handler=_run_inspect)


def add_seal_options(parser: argparse.ArgumentParser) -> None:
    """Profile-specific sealing options (extended by encrypted profiles)."""
    add_age_seal_options(parser)


def add_open_options(parser: argparse.ArgumentParser) -> None:
    """Profile-specific opening options (extended by encrypted profiles)."""
    parser.add_argument(
        "--allow",
        default=None,
        help="comma-separated ciphers the effective policy allows (default: no policy check)",
    )

    add_age_open_options(parser)


def seal_params_from_args(args: argparse.Namespace) -> Any:
    limit = args.max_blob_bytes if args.max_blob_bytes is not None else MAX_BLOB_BYTES
    if args.cipher == "age-v1":  # age-v1 (#3)
        return age_seal_params(args, limit)
    return SealParams(max_blob_bytes=limit)


def open_context_from_args(args: argparse.Namespace) -> Any:
    allowed = None if args.allow is None else frozenset(filter(None, args.allow.split(",")))
    if args.team_id is not None:  # age-v1 (#3)
        return age_open_context(args, allowed)
    return OpenContext(allowed_ciphers=allowed)


def _fail(action: str, message: str, code: int) -> int:
    print(f"syncengine envelope {action}: {message}", file=sys.stderr)
    return code


def _run_seal(args: argparse.Namespace) -> int:
    try:
        params = seal_params_from_args(args)
        for number, text in read_lines():
            try:
                message = Message.from_obj(jcs.loads(text))
            except WireError as exc:
                return _fail("seal", f"line {number}: {exc}", EXIT_INVALID_INPUT)
            try:
                envelope = seal(message, args.cipher, params)
            except ProfileError as exc:
                return _fail("seal", f"line {number}: {exc}", EXIT_CANNOT_SEAL)
            write_record(envelope.to_obj())
    except (InputError, ProfileError) as exc:
        return _fail("seal", str(exc), EXIT_INVALID_INPUT)
    return EXIT_OK


def _each_envelope(action: str) -> Any:
    """Yield parsed envelopes, or an int exit code as the last item on bad input."""
    try:
        for number, text in read_lines():
            try:
                yield Envelope.from_json(text)
            except WireError as exc:
                yield _fail(action, f"line {number}: {exc}", EXIT_INVALID_INPUT)
                return
    except InputError as exc:
        yield _fail(action, str(exc), EXIT_INVALID_INPUT)


def _run_open(args: argparse.Namespace) -> int:
    try:
        ctx = open_context_from_args(args)
    except WireError as exc:
        return _fail("open", str(exc), EXIT_INVALID_INPUT)
    code = EXIT_OK
    for item in _each_envelope("open"):
        if isinstance(item, int):
            return item
        outcome = open_envelope(item, ctx)
        if isinstance(outcome, Importable):
            write_record(outcome.message.to_obj())
        else:
            write_record({"state": outcome.state.value, "reason": outcome.reason})
            code = EXIT_BLOCKED
    return code


def _run_digest(args: argparse.Namespace) -> int:
    for item in _each_envelope("digest"):
        if isinstance(item, int):
            return item
        write_record({"digest": item.digest().hex()})
    return EXIT_OK


def _run_inspect(args: argparse.Namespace) -> int:
    for item in _each_envelope("inspect"):
        if isinstance(item, int):
            return item
        write_record(
            {
                "v": item.v,
                "cipher": item.cipher,
                "key_id": item.key_id,
                "blob_bytes": item.blob_size,
                "blob_chars": len(item.blob),
                "envelope_bytes": len(item.canonical_bytes()),
                "digest": item.digest().hex(),
            }
        )
    return EXIT_OK
