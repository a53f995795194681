"""The reader's manifest check (issue #34; docs/spec/age-v1-profile.md
"Recipient-set epochs": the header holds exactly one X25519 stanza per
recipient of the epoch manifest, and implementations fail closed on
accidental manifest drift; specs/age-v1.md "The reader's manifest check").

Where the caller trusts a manifest for the epoch, a header whose X25519
stanza count differs from it is ``manifest_mismatch`` — blocking, with no
projection — after the decryption and the context comparison succeeded.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.wire.age_craft import craft, stanza
from wire import age_format
from wire.age_frame import build_context, encode_frame
from wire.age_keys import X25519Identity
from wire.age_profile import make_open_context, x25519_stanza_count
from wire.envelope import Envelope
from wire.message import Message
from wire.outcome import Blocked, BlockState, Importable
from wire.profiles import Binding, OpenContext, SealParams, open_envelope, seal

TEAM = "018f3f7e-0000-7000-8000-000000000001"
WIRE = "550e8400-e29b-41d4-a716-446655440000"
OTHER_WIRE = "550e8400-e29b-41d4-a716-446655440001"
ALICE, BOB, OUTSIDER = (X25519Identity.generate() for _ in range(3))
MESSAGE = Message("Run the test suite", "2026-07-20T06:30:00.000000Z", "leader", "worker-1")
BINDING = Binding(TEAM, WIRE, 1)
TEAM_MANIFEST = (ALICE.recipient.to_string(), BOB.recipient.to_string())


def _sealed_to(*members: X25519Identity, wire_id: str = WIRE) -> Envelope:
    recipients = tuple(m.recipient.to_string() for m in members)
    params = SealParams(Binding(TEAM, wire_id, 1), "epoch-1", recipients)
    return seal(MESSAGE, "age-v1", params)


def _ctx(manifest: tuple[str, ...] | None = TEAM_MANIFEST) -> OpenContext:
    return OpenContext(
        binding=BINDING,
        trusted_key_id="epoch-1",
        identities={"epoch-1": ALICE},
        manifests={} if manifest is None else {"epoch-1": manifest},
    )


def test_an_envelope_sealed_to_exactly_the_manifest_opens() -> None:
    outcome = open_envelope(_sealed_to(ALICE, BOB), _ctx())
    assert isinstance(outcome, Importable) and outcome.message == MESSAGE


def test_a_writer_that_also_sealed_to_an_outsider_is_manifest_mismatch() -> None:
    outcome = open_envelope(_sealed_to(ALICE, BOB, OUTSIDER), _ctx())
    assert isinstance(outcome, Blocked)
    assert outcome.state is BlockState.MANIFEST_MISMATCH
    assert "3 X25519 recipient stanza(s)" in outcome.reason and "2 recipient(s)" in outcome.reason


def test_a_writer_that_left_a_recipient_out_is_manifest_mismatch() -> None:
    outcome = open_envelope(_sealed_to(ALICE), _ctx())
    assert isinstance(outcome, Blocked) and outcome.state is BlockState.MANIFEST_MISMATCH


def test_a_mismatch_carries_no_projection_of_the_message() -> None:
    outcome = open_envelope(_sealed_to(ALICE, BOB, OUTSIDER), _ctx())
    assert not hasattr(outcome, "message")
    assert MESSAGE.body not in repr(outcome)


def test_without_a_trusted_manifest_the_check_is_not_made() -> None:
    outcome = open_envelope(_sealed_to(ALICE, BOB, OUTSIDER), _ctx(manifest=None))
    assert isinstance(outcome, Importable)


def test_a_substituted_envelope_stays_authentication_failed_not_a_mismatch() -> None:
    """The context comparison comes first: an envelope moved to another wire
    ID is the relay's tampering, whatever its header holds."""
    outcome = open_envelope(_sealed_to(ALICE, BOB, OUTSIDER, wire_id=OTHER_WIRE), _ctx())
    assert isinstance(outcome, Blocked) and outcome.state is BlockState.AUTHENTICATION_FAILED


def test_an_undecryptable_envelope_stays_authentication_failed_not_a_mismatch() -> None:
    outcome = open_envelope(_sealed_to(BOB, OUTSIDER), _ctx())
    assert isinstance(outcome, Blocked) and outcome.state is BlockState.AUTHENTICATION_FAILED


def _framed(recipients: list[X25519Identity], grease: int, first: bool) -> Envelope:
    context = build_context(1, TEAM, WIRE, "age-v1", "epoch-1")
    extra = [stanza(f"g{i}-grease a{i}", bytes(i + 1)) for i in range(grease)]
    data = craft(
        encode_frame(context, MESSAGE.to_jcs()),
        [r.recipient for r in recipients],
        extra_stanzas=extra,
        extra_first=first,
    )
    return Envelope.from_blob_bytes("age-v1", "epoch-1", data)


def test_grease_stanzas_neither_satisfy_nor_break_the_manifest_check() -> None:
    assert isinstance(open_envelope(_framed([ALICE, BOB], 3, first=True), _ctx()), Importable)
    drifted = open_envelope(_framed([ALICE], 1, first=False), _ctx())
    assert isinstance(drifted, Blocked) and drifted.state is BlockState.MANIFEST_MISMATCH


def test_an_open_context_made_with_the_manifest_checks_it() -> None:
    ctx = make_open_context(
        team_id=TEAM,
        wire_id=WIRE,
        trusted_key_id="epoch-1",
        identity_file=ALICE.to_secret_string().encode() + b"\n",
        recipients=TEAM_MANIFEST,
    )
    outcome = open_envelope(_sealed_to(ALICE, BOB, OUTSIDER), ctx)
    assert isinstance(outcome, Blocked) and outcome.state is BlockState.MANIFEST_MISMATCH
    assert isinstance(open_envelope(_sealed_to(ALICE, BOB), ctx), Importable)


@settings(max_examples=60, deadline=None)
@given(
    x25519=st.integers(1, 6),
    grease=st.lists(
        st.tuples(st.sampled_from(["a-grease", "zz-grease", "X-grease"]), st.binary(max_size=40)),
        max_size=4,
    ),
    first=st.booleans(),
    args=st.lists(st.sampled_from(["X25519", "---", "->", "k"]), max_size=3),
)
def test_the_byte_count_of_x25519_stanzas_equals_the_parsers(
    x25519: int, grease: list[tuple[str, bytes]], first: bool, args: list[str]
) -> None:
    extra = [stanza(" ".join([tag, *args]), body) for tag, body in grease]
    data = craft(b"frame", [ALICE.recipient] * x25519, extra_stanzas=extra, extra_first=first)
    expected = len(age_format.parse_header(data).x25519_stanzas)
    assert x25519_stanza_count(data) == expected == x25519


def test_a_manifest_mismatch_is_a_blocking_state_of_its_own() -> None:
    assert BlockState("manifest_mismatch") is BlockState.MANIFEST_MISMATCH
    replaced = dataclasses.replace(_ctx(), manifests={"epoch-1": (ALICE.recipient.to_string(),)})
    outcome = open_envelope(_sealed_to(ALICE, BOB), replaced)
    assert isinstance(outcome, Blocked) and outcome.state.value == "manifest_mismatch"
