"""Interoperability with the standard age tools, both ways.

Files we seal must decrypt with the ``age`` CLI and with pyrage (Rust ``age``)
to exactly our frame; files they produce must open here. Identity material is
only ever passed to ``age`` in a 0600 temporary file, never on argv
(age-v1-profile.md "Key bootstrap and operational limits").
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from wire import age_format
from wire.age_frame import build_context, encode_frame
from wire.age_keys import X25519Identity, parse_identity_file
from wire.envelope import Envelope
from wire.message import Message
from wire.outcome import Importable
from wire.profiles import Binding, OpenContext, SealParams, open_envelope, seal

pyrage = pytest.importorskip("pyrage")

AGE = shutil.which("age")
AGE_KEYGEN = shutil.which("age-keygen")
needs_age = pytest.mark.skipif(AGE is None, reason="the age CLI is not installed")

TEAM = "018f3f7e-0000-7000-8000-000000000001"
WIRE = "550e8400-e29b-41d4-a716-446655440000"
ALICE = X25519Identity.generate()
BOB = X25519Identity.generate()
MESSAGE = Message("Run the test suite ✓", "2026-07-20T06:30:00.000000Z", "leader", "worker-1")
FRAME = encode_frame(build_context(1, TEAM, WIRE, "age-v1", "epoch-1"), MESSAGE.to_jcs())
PARAMS = SealParams(
    binding=Binding(TEAM, WIRE, 1),
    key_id="epoch-1",
    recipients=(ALICE.recipient.to_string(), BOB.recipient.to_string()),
)
CTX = OpenContext(
    binding=Binding(TEAM, WIRE, 1), trusted_key_id="epoch-1", identities={"epoch-1": ALICE}
)


def _identity_file(tmp_path: Path, identity: X25519Identity) -> Path:
    path = tmp_path / "identity.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(identity.to_secret_string() + "\n")
    return path


def _open_foreign(data: bytes) -> object:
    return open_envelope(Envelope.from_blob_bytes("age-v1", "epoch-1", data), CTX)


# --- pyrage -----------------------------------------------------------------------------


def test_pyrage_decrypts_our_sealed_file_to_our_frame() -> None:
    data = seal(MESSAGE, "age-v1", PARAMS).blob_bytes()
    for identity in (ALICE, BOB):
        theirs = pyrage.x25519.Identity.from_str(identity.to_secret_string())
        assert pyrage.decrypt(data, [theirs]) == FRAME


def test_files_pyrage_encrypts_open_here() -> None:
    # Rust age adds a random GREASE stanza each time; try several.
    recipient = pyrage.x25519.Recipient.from_str(ALICE.recipient.to_string())
    for _ in range(20):
        data = pyrage.encrypt(FRAME, [recipient])
        assert _open_foreign(data) == Importable(MESSAGE)


def test_large_files_pyrage_encrypts_decrypt_here() -> None:
    plaintext = os.urandom(3 * age_format.CHUNK_SIZE + 5)
    recipient = pyrage.x25519.Recipient.from_str(ALICE.recipient.to_string())
    assert age_format.decrypt(pyrage.encrypt(plaintext, [recipient]), ALICE) == plaintext


def test_pyrage_and_we_derive_the_same_recipient() -> None:
    theirs = pyrage.x25519.Identity.from_str(ALICE.to_secret_string())
    assert str(theirs.to_public()) == ALICE.recipient.to_string()
    generated = pyrage.x25519.Identity.generate()
    ours = X25519Identity.from_string(str(generated))
    assert ours.recipient.to_string() == str(generated.to_public())


# --- the age CLI -------------------------------------------------------------------------


@needs_age
def test_age_cli_decrypts_our_sealed_file_to_our_frame(tmp_path: Path) -> None:
    data = seal(MESSAGE, "age-v1", PARAMS).blob_bytes()
    identity_path = _identity_file(tmp_path, BOB)
    result = subprocess.run(
        [str(AGE), "--decrypt", "--identity", str(identity_path)],
        input=data,
        capture_output=True,
        check=True,
    )
    assert result.stdout == FRAME


@needs_age
def test_files_the_age_cli_encrypts_open_here(tmp_path: Path) -> None:
    recipients = tmp_path / "recipients.txt"
    recipients.write_text(f"{BOB.recipient.to_string()}\n{ALICE.recipient.to_string()}\n")
    result = subprocess.run(
        [str(AGE), "--encrypt", "--recipients-file", str(recipients)],
        input=FRAME,
        capture_output=True,
        check=True,
    )
    assert age_format.parse_header(result.stdout).x25519_stanzas
    assert _open_foreign(result.stdout) == Importable(MESSAGE)


@needs_age
def test_armored_files_from_the_age_cli_are_refused(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(AGE), "--encrypt", "--armor", "--recipient", ALICE.recipient.to_string()],
        input=FRAME,
        capture_output=True,
        check=True,
    )
    with pytest.raises(age_format.AgeFormatError, match="armor"):
        age_format.decrypt(result.stdout, ALICE)


@needs_age
def test_multi_chunk_files_round_trip_with_the_age_cli(tmp_path: Path) -> None:
    plaintext = os.urandom(2 * age_format.CHUNK_SIZE)
    ours = age_format.encrypt(plaintext, [ALICE.recipient])
    identity_path = _identity_file(tmp_path, ALICE)
    decrypted = subprocess.run(
        [str(AGE), "-d", "-i", str(identity_path)], input=ours, capture_output=True, check=True
    )
    assert decrypted.stdout == plaintext
    theirs = subprocess.run(
        [str(AGE), "-r", ALICE.recipient.to_string()],
        input=plaintext,
        capture_output=True,
        check=True,
    )
    assert age_format.decrypt(theirs.stdout, ALICE) == plaintext


@pytest.mark.skipif(AGE_KEYGEN is None, reason="age-keygen is not installed")
def test_age_keygen_identity_files_parse_and_derive_the_same_recipient(tmp_path: Path) -> None:
    path = tmp_path / "key.txt"
    subprocess.run([str(AGE_KEYGEN), "-o", str(path)], capture_output=True, check=True)
    identity = parse_identity_file(path.read_bytes())
    public = subprocess.run(
        [str(AGE_KEYGEN), "-y", str(path)], capture_output=True, check=True, text=True
    ).stdout.strip()
    assert identity.recipient.to_string() == public
