"""age-v1 options for ``syncengine envelope seal|open``.

The envelope command owns its parser; this module adds the options the age-v1
profile needs and turns them into :class:`wire.profiles.SealParams` /
:class:`wire.profiles.OpenContext`. Keys are only ever read from files named on
the command line (``--identity FILE``); recipients are public and may be given
inline. Errors are :class:`wire.errors.ProfileError` naming the option and never
quoting file content.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from syncengine.cli.keys import read_identity_file
from wire.errors import ProfileError, WireError

if TYPE_CHECKING:
    from wire.profiles import OpenContext, SealParams

__all__ = ["add_age_open_options", "add_age_seal_options", "age_open_context", "age_seal_params"]


def _add_binding(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--team-id", default=None, help="trusted remote team UUIDv7")
    group.add_argument("--wire-id", default=None, help="the message's wire UUIDv4")
    group.add_argument(
        "--protocol-version", type=int, default=1, help="protocol version bound in (default 1)"
    )


def _add_recipients(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--recipient", action="append", default=[], metavar="AGE1", help="manifest recipient"
    )
    group.add_argument(
        "--recipients-file", type=Path, default=None, help="manifest file: one age1… per line"
    )


def add_age_seal_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("age-v1 (with --cipher age-v1)")
    group.add_argument("--key-id", default=None, help="the epoch key_id to seal under")
    _add_recipients(group)
    _add_binding(group)


def add_age_open_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("age-v1 (enabled by --team-id)")
    group.add_argument("--identity", type=Path, default=None, help="identity file for the epoch")
    group.add_argument(
        "--trusted-key-id", default=None, help="the epoch effective at the message's sequence"
    )
    _add_recipients(group)
    _add_binding(group)


def _read(path: Path, option: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ProfileError(option, f"{path}: cannot read ({exc.strerror})") from None


def _recipients(args: argparse.Namespace) -> list[str]:
    # start-up pin (CRYPTO): only age-v1 loads wire.age_profile
    from wire.age_profile import parse_recipients_file

    found = list(args.recipient)
    if args.recipients_file is not None:
        found += parse_recipients_file(_read(args.recipients_file, "--recipients-file"))
    return found


def _require(args: argparse.Namespace, *names: str) -> None:
    for name in names:
        if getattr(args, name) is None:
            raise ProfileError("--" + name.replace("_", "-"), "is required for age-v1")


def age_seal_params(args: argparse.Namespace, max_blob_bytes: int) -> SealParams:
    # start-up pin (CRYPTO): only age-v1 loads wire.age_profile
    from wire.age_profile import make_seal_params

    _require(args, "key_id", "team_id", "wire_id")
    return make_seal_params(
        team_id=args.team_id,
        wire_id=args.wire_id,
        key_id=args.key_id,
        recipients=_recipients(args),
        protocol_version=args.protocol_version,
        max_blob_bytes=max_blob_bytes,
    )


def age_open_context(args: argparse.Namespace, allowed: frozenset[str] | None) -> OpenContext:
    # start-up pin (CRYPTO): only age-v1 loads wire.age_profile
    from wire.age_profile import make_open_context

    _require(args, "team_id", "wire_id", "trusted_key_id")
    identity: bytes | None = None
    if args.identity is not None:
        try:
            identity = read_identity_file(args.identity)
        except OSError as exc:
            raise ProfileError(
                "--identity", f"{args.identity}: cannot read ({exc.strerror})"
            ) from None
    manifest = _recipients(args) or None
    try:
        ctx = make_open_context(
            team_id=args.team_id,
            wire_id=args.wire_id,
            trusted_key_id=args.trusted_key_id,
            identity_file=identity,
            recipients=manifest,
            protocol_version=args.protocol_version,
        )
    except ProfileError:
        raise
    except WireError as exc:  # e.g. a Bech32 fault in the identity file
        raise ProfileError(exc.field, exc.rule) from None
    return dataclasses.replace(ctx, allowed_ciphers=allowed)
