"""``syncengine keys``: create and inspect age-v1 identity files.

* ``generate --output FILE`` writes a new X25519 identity file (mode 0600),
  atomically and never over an existing file, and prints its ``age1…``
  recipient: the public half an operator adds to an epoch manifest.
* ``recipient FILE`` prints the recipient of an existing identity file after
  checking it under the profile's identity-file rules.

Identity bytes never appear on argv, on stdout, in logs or in error messages
(docs/spec/age-v1-profile.md "Key bootstrap and operational limits"); only
file paths and recipients are printed.

Exit codes: 0 success; 2 the file cannot be used (named on stderr).
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from syncengine.cli import epochs
from syncengine.private_files import write_new_private_file
from wire.errors import WireError

EXIT_OK = 0
EXIT_FAILED = 2


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "keys",
        help="generate and inspect age-v1 identity files",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    generate = actions.add_parser("generate", help="write a new identity file (mode 0600)")
    generate.add_argument("--output", required=True, type=Path, help="file to create")
    generate.set_defaults(handler=_run_generate)

    recipient = actions.add_parser("recipient", help="print the recipient of an identity file")
    recipient.add_argument("file", type=Path, help="identity file")
    recipient.set_defaults(handler=_run_recipient)

    epochs.register(actions)


def _fail(action: str, message: str) -> int:
    print(f"syncengine keys {action}: {message}", file=sys.stderr)
    return EXIT_FAILED


def identity_file_text(secret: str, recipient: str) -> str:
    """The file body, in the layout age-keygen uses (comments, then the key)."""
    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"# created: {created}\n# public key: {recipient}\n{secret}\n"


def _run_generate(args: argparse.Namespace) -> int:
    # start-up pin (CRYPTO): only this path loads wire.age_keys
    from wire.age_keys import X25519Identity

    path: Path = args.output
    if path.exists() or path.is_symlink():
        return _fail("generate", f"{path}: already exists; refusing to overwrite an identity")
    identity = X25519Identity.generate()
    recipient = identity.recipient.to_string()
    data = identity_file_text(identity.to_secret_string(), recipient).encode("ascii")
    try:
        write_new_private_file(path, data)
    except FileExistsError:
        return _fail("generate", f"{path}: already exists; refusing to overwrite an identity")
    except OSError as exc:
        return _fail("generate", f"{path}: cannot write ({exc.strerror})")
    print(recipient)
    return EXIT_OK


MAX_IDENTITY_FILE_BYTES = 64 * 1024


def read_identity_file(path: Path) -> bytes:
    """Read an identity file's bytes, warning if others can read it.

    Raises OSError, or AgeKeyError for an oversized file; neither carries
    any of the file's content.
    """
    # start-up pin (CRYPTO): only this path loads wire.age_keys
    from wire.age_keys import AgeKeyError

    with open(path, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            print(
                f"syncengine: warning: {path} is accessible by group or others "
                f"(mode {stat.S_IMODE(mode):04o}); run: chmod 600 {path}",
                file=sys.stderr,
            )
        data = handle.read(MAX_IDENTITY_FILE_BYTES + 1)
    if len(data) > MAX_IDENTITY_FILE_BYTES:
        raise AgeKeyError(str(path), "an identity file is at most 64 KiB")
    return data


def _run_recipient(args: argparse.Namespace) -> int:
    # start-up pin (CRYPTO): only this path loads wire.age_keys
    from wire.age_keys import parse_identity_file

    path: Path = args.file
    try:
        identity = parse_identity_file(read_identity_file(path), field_name=str(path))
    except OSError as exc:
        return _fail("recipient", f"{path}: cannot read ({exc.strerror})")
    except WireError as exc:
        return _fail("recipient", str(exc))
    print(identity.recipient.to_string())
    return EXIT_OK
