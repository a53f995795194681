"""The shared age-v1 conformance vectors (profile "Shared conformance vectors").

The kappaseijin manifest is authoritative (shared/vectors/README.md): its last
two cases follow the profile text and are ``malformed``. Each case must yield
exactly its expected state and never a projection for a negative case.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from wire import age_format
from wire.age_keys import X25519Identity
from wire.envelope import Envelope
from wire.message import Message
from wire.outcome import Blocked, Importable
from wire.profiles import Binding, OpenContext, open_envelope

VECTORS = Path(__file__).resolve().parents[2] / ".." / "shared" / "vectors"
MANIFEST_FILE = VECTORS / "age-v1-vectors.kappaseijin-0de717e.json"
GREASE_FILE = VECTORS / "age-v1-rust-grease.json"

if not MANIFEST_FILE.exists():  # pragma: no cover - CI always has shared/ beside the repo
    pytest.skip("shared conformance vectors are not available", allow_module_level=True)

MANIFEST: dict[str, Any] = json.loads(MANIFEST_FILE.read_text())
GREASE: dict[str, Any] = json.loads(GREASE_FILE.read_text())
CASES: dict[str, dict[str, Any]] = {case["name"]: case for case in MANIFEST["vectors"]}


def _envelope_obj(case: dict[str, Any]) -> dict[str, Any]:
    source = case if "envelope" in case else CASES[case["envelope_from"]]
    obj = dict(source["envelope"])
    obj.update(case.get("envelope_override", {}))
    return obj


def _context(case: dict[str, Any]) -> OpenContext:
    binding = {**MANIFEST["binding"], **case.get("binding_override", {})}
    identity = X25519Identity.from_string(MANIFEST["recipient_sets"][case["identity"]]["identity"])
    trusted = case.get("trusted_epoch_key_id", MANIFEST["binding"]["key_id"])
    return OpenContext(
        binding=Binding(binding["team_id"], binding["wire_id"], binding["protocol_version"]),
        trusted_key_id=trusted,
        identities={trusted: identity},
    )


def test_manifest_is_the_authoritative_revision() -> None:
    assert MANIFEST["profile"] == "age-v1"
    assert CASES["unknown-message-key"]["expected_state"] == "malformed"
    assert CASES["noncanonical-message"]["expected_state"] == "malformed"


@pytest.mark.parametrize("name", list(CASES))
def test_vector_opens_to_its_expected_state(name: str) -> None:
    case = CASES[name]
    envelope = Envelope.from_obj(_envelope_obj(case))
    assert hashlib.sha256(envelope.blob_bytes()).hexdigest() == case["age_file_sha256"]
    outcome = open_envelope(envelope, _context(case))
    expected = case["expected_state"]
    if expected == "importable":
        assert isinstance(outcome, Importable)
        assert outcome.message == Message(**MANIFEST["canonical_message"])
    else:
        assert isinstance(outcome, Blocked), f"{name} must not yield a projection"
        assert outcome.state == expected, outcome.reason


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if "envelope" in c])
def test_vector_age_file_decrypts_to_the_recorded_frame(name: str) -> None:
    case = CASES[name]
    identity = X25519Identity.from_string(MANIFEST["recipient_sets"]["team_a"]["identity"])
    frame = age_format.decrypt(base64.b64decode(case["envelope"]["blob"]), identity)
    assert hashlib.sha256(frame).hexdigest() == case["decrypted_frame_sha256"]


def test_valid_vector_frame_is_the_canonical_plaintext() -> None:
    identity = X25519Identity.from_string(MANIFEST["recipient_sets"]["team_a"]["identity"])
    frame = age_format.decrypt(base64.b64decode(CASES["valid"]["envelope"]["blob"]), identity)
    assert frame.hex() == MANIFEST["canonical_plaintext_hex"]
    assert MANIFEST["canonical_context_hex"] in frame.hex()


def test_recipient_sets_derive_from_their_identities() -> None:
    for entry in MANIFEST["recipient_sets"].values():
        identity = X25519Identity.from_string(entry["identity"])
        assert identity.recipient.to_string() == entry["recipient"]


def test_rust_grease_fixture_has_one_x25519_and_one_grease_stanza() -> None:
    data = base64.b64decode(GREASE["envelope"]["blob"])
    assert hashlib.sha256(data).hexdigest() == GREASE["age_file_sha256"]
    header = age_format.parse_header(data)
    assert len(header.x25519_stanzas) == GREASE["x25519_stanza_count"]
    assert len(header.stanzas) == GREASE["total_stanza_count"]
    assert header.stanzas[1].tag.endswith("-grease")


def test_rust_grease_fixture_opens_to_the_valid_vector_frame() -> None:
    identity = X25519Identity.from_string(MANIFEST["recipient_sets"]["team_a"]["identity"])
    frame = age_format.decrypt(base64.b64decode(GREASE["envelope"]["blob"]), identity)
    assert hashlib.sha256(frame).hexdigest() == GREASE["decrypted_frame_sha256"]
    assert GREASE["decrypted_frame_sha256"] == CASES["valid"]["decrypted_frame_sha256"]


def test_rust_grease_fixture_is_importable() -> None:
    case = {"identity": GREASE["recipient_set"]}
    outcome = open_envelope(Envelope.from_obj(GREASE["envelope"]), _context(case))
    assert isinstance(outcome, Importable)
    assert outcome.message == Message(**MANIFEST["canonical_message"])
