"""The epoch-snapshot chain and the retained checkpoint's acceptance rule
(syncengine/engine/epochs.py, syncengine/engine/epoch_checkpoint.py;
docs/spec/age-v1-profile.md "Epoch snapshots and rollback resistance";
specs/age-v1.md "Epoch authority")."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncengine.engine.epoch_checkpoint import Checkpoint, CheckpointRefused, admit
from syncengine.engine.epochs import EpochHistory, EpochSnapshot, KeyEpoch, LegacySnapshotRefused
from syncengine.engine.errors import ConfigurationError
from syncengine.engine.security import SecurityEntry, SecurityHistory, SecurityMode
from wire.age_keys import X25519Identity
from wire.jcs import canonicalize

R1, R2, R3 = (X25519Identity.generate().recipient.to_string() for _ in range(3))
INSTANCE = "01900000-0000-7000-8000-000000000001"
TEAM = "01900000-0000-7000-8000-000000000002"
E2EE = SecurityHistory.initial(SecurityMode.E2EE_REQUIRED)


def history(count: int) -> EpochHistory:
    return EpochHistory(
        tuple(KeyEpoch(i, 1 + 10 * i, f"epoch-{i + 1}", (R1, R2)) for i in range(count))
    )


def root(epochs: int = 1) -> EpochSnapshot:
    return EpochSnapshot(INSTANCE, TEAM, history(epochs).epochs, E2EE.entries)


def chain(length: int) -> list[EpochSnapshot]:
    """Snapshots 0..length-1: each a rotation on top of the one before."""
    links = [root()]
    while len(links) < length:
        links.append(links[-1].successor(history(len(links) + 1), E2EE))
    return links


def checkpoint_of(snapshot: EpochSnapshot) -> Checkpoint:
    return Checkpoint(
        snapshot.epoch_revision,
        snapshot.digest(),
        snapshot.writer_generation,
        snapshot.encode(),
    )


def held_by(snapshot: EpochSnapshot) -> EpochHistory:
    return EpochHistory(snapshot.epochs)


def test_a_snapshot_carries_its_revision_generation_roster_and_previous_digest() -> None:
    first, second = chain(2)
    obj = json.loads(second.encode())
    assert obj["epoch_revision"] == "1"
    assert obj["writer_generation"] == "1"  # the current epoch's revision
    assert obj["writer_roster"] == sorted([R1, R2])
    assert obj["previous_snapshot_sha256"] == first.digest()
    assert json.loads(first.encode())["previous_snapshot_sha256"] is None


def test_a_chained_snapshot_round_trips_through_its_canonical_bytes() -> None:
    second = chain(2)[1]
    assert EpochSnapshot.decode(second.encode()) == second


def test_the_next_snapshot_of_the_chain_is_accepted_with_the_epochs_it_adds() -> None:
    first, second = chain(2)
    added = admit(checkpoint_of(first), second, held_by(first))
    assert [e.key_id for e in added] == ["epoch-2"]


def test_the_snapshot_already_held_adds_nothing() -> None:
    second = chain(2)[1]
    assert admit(checkpoint_of(second), second, held_by(second)) == ()


def test_an_older_revision_is_refused_as_a_rollback_naming_both() -> None:
    first, second = chain(2)
    with pytest.raises(CheckpointRefused, match="rollback") as caught:
        admit(checkpoint_of(second), first, held_by(second))
    assert f"revision 1 (sha256 {second.digest()})" in str(caught.value)
    assert f"revision 0 (sha256 {first.digest()}" in str(caught.value)


def test_the_same_revision_with_another_digest_is_refused_as_a_fork() -> None:
    first = chain(1)[0]
    other = EpochSnapshot(INSTANCE, TEAM, (KeyEpoch(0, 1, "epoch-1", (R3,)),), E2EE.entries)
    with pytest.raises(CheckpointRefused, match="fork") as caught:
        admit(checkpoint_of(first), other, held_by(first))
    assert first.digest() in str(caught.value) and other.digest() in str(caught.value)


def test_a_next_revision_that_follows_another_digest_is_refused_as_a_fork() -> None:
    first = chain(1)[0]
    stranger = EpochSnapshot(INSTANCE, TEAM, (KeyEpoch(0, 1, "epoch-1", (R3,)),), E2EE.entries)
    forked = stranger.successor(history(2), E2EE)  # revision 1, but after another root
    with pytest.raises(CheckpointRefused, match="fork") as caught:
        admit(checkpoint_of(first), forked, held_by(first))
    assert f"expected revision 1 following sha256 {first.digest()}" in str(caught.value)


def test_a_snapshot_more_than_one_revision_ahead_is_refused_as_a_gap() -> None:
    links = chain(4)
    with pytest.raises(CheckpointRefused, match="gap") as caught:
        admit(checkpoint_of(links[0]), links[3], held_by(links[0]))
    assert "revisions 1..2 are missing" in str(caught.value)
    assert f"expected revision 1 following sha256 {links[0].digest()}" in str(caught.value)


def test_a_snapshot_that_lowers_the_writer_generation_is_refused() -> None:
    first, second = chain(2)
    # A checkpoint claiming a later generation than the successor carries.
    ahead = Checkpoint(0, first.digest(), 5, first.encode())
    with pytest.raises(CheckpointRefused, match="writer generation from 5 to 1"):
        admit(ahead, second, held_by(first))


def test_a_legacy_checkpoint_accepts_a_chained_snapshot_that_extends_its_epochs() -> None:
    legacy = Checkpoint(0, None, 0, None)
    second = chain(2)[1]
    assert [e.key_id for e in admit(legacy, second, history(1))] == ["epoch-2"]


def test_a_legacy_checkpoint_refuses_a_snapshot_with_fewer_epochs() -> None:
    legacy = Checkpoint(0, None, 0, None)
    with pytest.raises(ConfigurationError, match="older snapshot is never imported"):
        admit(legacy, root(1), history(2))


@given(st.integers(min_value=0, max_value=5), st.integers(min_value=0, max_value=5))
def test_from_any_checkpoint_only_itself_and_its_direct_successor_are_accepted(
    held: int, offered: int
) -> None:
    links = chain(6)
    checkpoint = checkpoint_of(links[held])
    if offered in (held, held + 1):
        admit(checkpoint, links[offered], held_by(links[held]))
    else:
        with pytest.raises(CheckpointRefused):
            admit(checkpoint, links[offered], held_by(links[held]))


def test_a_version_1_snapshot_is_refused_with_the_remedy_to_export_it_again() -> None:
    legacy = {
        "format": "syncengine-epoch-snapshot",
        "version": 1,
        "profile": "age-v1",
        "server_instance_id": INSTANCE,
        "team_id": TEAM,
        "epochs": [
            {"revision": "0", "effective_from_seq": "1", "key_id": "epoch-1", "recipients": [R1]}
        ],
        "local_security_history": [
            {"revision": "0", "effective_from_seq": "1", "minimum_security_mode": "e2ee-required"}
        ],
    }
    with pytest.raises(LegacySnapshotRefused, match="version 1") as caught:
        EpochSnapshot.decode(canonicalize(legacy))
    assert "Export the snapshot again" in caught.value.remediation


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("writer_generation", "0", "writer_generation must be the current epoch's revision"),
        ("writer_roster", [R3], "writer_roster must be the current epoch's recipients"),
        ("previous_snapshot_sha256", None, "null exactly at epoch_revision 0"),
        ("previous_snapshot_sha256", "ABC", "64 lowercase hex"),
        ("epoch_revision", "01", "canonical decimal"),
    ],
)
def test_a_chain_field_that_contradicts_the_snapshot_is_refused_naming_it(
    field: str, value: object, rule: str
) -> None:
    obj = json.loads(chain(2)[1].encode())
    obj[field] = value
    with pytest.raises(ConfigurationError, match=rule):
        EpochSnapshot.decode(canonicalize(obj))


def test_a_root_that_names_a_previous_snapshot_is_refused() -> None:
    obj = json.loads(root().encode())
    obj["previous_snapshot_sha256"] = "0" * 64
    with pytest.raises(ConfigurationError, match="null exactly at epoch_revision 0"):
        EpochSnapshot.decode(canonicalize(obj))


def test_a_successor_after_a_security_change_keeps_the_writer_generation() -> None:
    first = root()
    later = SecurityHistory((*E2EE.entries, SecurityEntry(1, 7, SecurityMode.E2EE_REQUIRED)))
    second = first.successor(history(1), later)
    assert (second.epoch_revision, second.writer_generation) == (1, 0)
    assert not first.same_content(history(1), later) and second.same_content(history(1), later)


def test_a_snapshot_past_the_profiles_chain_bound_is_refused() -> None:
    first = root()
    last = EpochSnapshot(INSTANCE, TEAM, history(1).epochs, E2EE.entries, 4096, first.digest())
    held = Checkpoint(4095, first.digest(), 0, first.encode())
    with pytest.raises(CheckpointRefused, match="at most 4096 snapshots"):
        admit(held, last, held_by(first))
