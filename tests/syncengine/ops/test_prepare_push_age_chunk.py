"""The one-pass ``age-v1`` sealer of a prepare chunk (issue #17, age-v1
prepare beside bare seals): message by message it must give exactly what
:func:`seal_local` gives — the same envelope bytes under the same
randomness, the same refusal with the same reason and recorded limit."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import SimpleNamespace
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from syncengine import ids
from syncengine.ops.bindings import BindingKey
from syncengine.ops.prepare_push import (
    BlockedSeal,
    LocalMessage,
    Sealed,
    seal_age_chunk,
    seal_chunk,
    seal_local,
)
from syncengine.ops.sync_records import SyncPrepare
from tests.syncengine.ops.helpers import new_key, prepare_age
from wire import age_format
from wire.age_keys import X25519Identity
from wire.outcome import Importable
from wire.profiles import Binding, OpenContext, open_envelope

AT = "2026-01-01T00:00:00.000000Z"
IDENTITY = X25519Identity.generate()
_NAMES = st.sampled_from(["alice", "bob", "zed", "Ünïcode-agent", "a", "x" * 128, "-bad", ""])
_BODIES = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=300)


@contextmanager
def _replayed_randomness(seed: int) -> Iterator[None]:
    """Both random sources a seal reads — wire IDs and the age file — from
    seeded streams, so two sealers that draw the same bytes in the same
    order produce the same output."""
    wire_ids = random.Random(seed)
    age_files = random.Random(seed + 1)
    with (
        mock.patch.object(ids, "os", SimpleNamespace(urandom=wire_ids.randbytes)),
        mock.patch.object(age_format, "os", SimpleNamespace(urandom=age_files.randbytes)),
    ):
        yield


def _both(
    chunk: Sequence[LocalMessage], request: SyncPrepare, key: BindingKey
) -> tuple[list[Sealed | BlockedSeal], list[Sealed | BlockedSeal]]:
    with _replayed_randomness(7):
        fast = seal_age_chunk(chunk, request, key)
    with _replayed_randomness(7):
        reference = [seal_local(message, request, key) for message in chunk]
    return fast, reference


def _assert_same(got: Sealed | BlockedSeal, want: Sealed | BlockedSeal) -> None:
    assert type(got) is type(want)
    assert got.message == want.message
    if isinstance(want, BlockedSeal):
        assert isinstance(got, BlockedSeal)
        assert (got.limit, got.reason) == (want.limit, want.reason)
    else:
        assert isinstance(got, Sealed)
        assert got.wire_id == want.wire_id
        assert got.envelope == want.envelope
        assert got.envelope.blob == want.envelope.blob


def _chunk(rows: Sequence[tuple[str, str, str, str]]) -> list[LocalMessage]:
    local_ids = ids.new_uuid7s(len(rows))
    return [
        LocalMessage(position, local_id, body, at, sender, recipient)
        for position, (local_id, (body, at, sender, recipient)) in enumerate(
            zip(local_ids, rows, strict=True), start=1
        )
    ]


def test_age_chunk_seals_and_refuses_exactly_as_seal_local() -> None:
    """Valid messages beside an invalid name, an impossible date, a lone
    surrogate, an empty body, a body over the blob limit and a legacy ``at``
    spelling: each gives seal_local's envelope bytes or refusal."""
    key = new_key()
    chunk = _chunk(
        [
            ('hello "quoted" \\ \n\u2028 ☃ 𝄞', AT, "alice", "bob"),
            ("hi", AT, "-bad", "bob"),
            ("hi", "2026-02-30T00:00:00.000000Z", "alice", "bob"),
            ("lone \ud800 surrogate", AT, "alice", "bob"),
            ("", AT, "alice", "bob"),
            ("x" * 2000, AT, "alice", "bob"),
            ("legacy at", "2026-01-01T00:00:00Z", "alice", "Ünïcode-agent"),
            ("last", AT, "alice", "bob"),
        ]
    )
    request = SyncPrepare(1, "age-v1", "epoch-1", (IDENTITY.recipient.to_string(),), 1024, True)
    fast, reference = _both(chunk, request, key)
    assert len(fast) == len(reference)
    for got, want in zip(fast, reference, strict=True):
        _assert_same(got, want)
    assert [type(item).__name__ for item in fast] == [
        "Sealed", "BlockedSeal", "BlockedSeal", "BlockedSeal", "BlockedSeal", "BlockedSeal",
        "Sealed", "Sealed",
    ]  # fmt: skip


def test_age_chunk_envelopes_open_to_their_messages_under_their_binding() -> None:
    """Not only equal to the reference: each envelope opens, with this
    machine's identity and the binding of its own wire ID, to its message."""
    key = new_key()
    chunk = _chunk([(f"message {i}", AT, "alice", "bob") for i in range(5)])
    sealed = seal_age_chunk(chunk, prepare_age(IDENTITY), key)
    for item, message in zip(sealed, chunk, strict=True):
        assert isinstance(item, Sealed)
        binding = Binding(key.remote_team_id, item.wire_id, key.protocol_version)
        ctx = OpenContext(
            binding=binding, trusted_key_id="epoch-1", identities={"epoch-1": IDENTITY}
        )
        outcome = open_envelope(item.envelope, ctx)
        assert isinstance(outcome, Importable)
        assert outcome.message.body == message.body
    assert len({item.wire_id for item in sealed if isinstance(item, Sealed)}) == len(chunk)


def test_a_request_the_manifest_refuses_blocks_every_message_as_seal_local_does() -> None:
    """A recipient that is not an age X25519 recipient, and a missing key_id:
    the chunk falls back whole and gives the reference's refusals."""
    key = new_key()
    chunk = _chunk([("one", AT, "alice", "bob"), ("two", AT, "alice", "bob")])
    for request in (
        SyncPrepare(1, "age-v1", "epoch-1", ("not-a-recipient",), 1024 * 1024, True),
        SyncPrepare(1, "age-v1", None, (IDENTITY.recipient.to_string(),), 1024 * 1024, True),
    ):
        fast, reference = _both(chunk, request, key)
        assert all(isinstance(item, BlockedSeal) for item in fast)
        for got, want in zip(fast, reference, strict=True):
            _assert_same(got, want)


def test_seal_chunk_dispatches_each_cipher_to_a_sealer_equal_to_seal_local() -> None:
    key = new_key()
    chunk = _chunk([("one", AT, "alice", "bob")])
    for request in (
        prepare_age(IDENTITY),
        SyncPrepare(1, "none", None, (), 1024 * 1024, True),
        SyncPrepare(1, "no-such-cipher", None, (), 1024 * 1024, True),
    ):
        with _replayed_randomness(3):
            fast = seal_chunk(chunk, request, key)
        with _replayed_randomness(3):
            reference = [seal_local(message, request, key) for message in chunk]
        for got, want in zip(fast, reference, strict=True):
            _assert_same(got, want)


@settings(max_examples=30, deadline=None)
@given(rows=st.lists(st.tuples(_BODIES, _NAMES, _NAMES), min_size=1, max_size=8))
def test_age_chunk_equals_seal_local_over_random_messages(
    rows: list[tuple[str, str, str]],
) -> None:
    key = new_key()
    chunk = _chunk([(body, AT, sender, recipient) for body, sender, recipient in rows])
    fast, reference = _both(chunk, prepare_age(IDENTITY), key)
    for got, want in zip(fast, reference, strict=True):
        _assert_same(got, want)
