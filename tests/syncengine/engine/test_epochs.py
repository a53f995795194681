"""The key-epoch history and its snapshot (syncengine/engine/epochs.py;
docs/spec/age-v1-profile.md "Recipient-set epochs", "Epoch snapshots")."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncengine.engine.epochs import MAX_KEY_EPOCHS, EpochHistory, EpochSnapshot, KeyEpoch
from syncengine.engine.errors import ConfigurationError
from syncengine.engine.security import SecurityEntry, SecurityMode
from wire.age_keys import X25519Identity
from wire.jcs import canonicalize

R1, R2, R3 = (X25519Identity.generate().recipient.to_string() for _ in range(3))
INSTANCE = "01900000-0000-7000-8000-000000000001"
TEAM = "01900000-0000-7000-8000-000000000002"


def history(*boundaries: int) -> EpochHistory:
    return EpochHistory(
        tuple(KeyEpoch(i, b, f"epoch-{i + 1}", (R1, R2)) for i, b in enumerate(boundaries))
    )


def snapshot(epochs: EpochHistory) -> EpochSnapshot:
    security = (SecurityEntry(0, 1, SecurityMode.E2EE_REQUIRED),)
    return EpochSnapshot(INSTANCE, TEAM, epochs.epochs, security)


def test_the_first_epoch_must_be_revision_zero_from_sequence_one() -> None:
    with pytest.raises(ConfigurationError, match="revision 0 from 1"):
        EpochHistory((KeyEpoch(0, 5, "epoch-1", (R1,)),))


def test_a_key_id_never_names_two_epochs() -> None:
    with pytest.raises(ConfigurationError, match="never reused"):
        EpochHistory((KeyEpoch(0, 1, "k", (R1,)), KeyEpoch(1, 9, "k", (R2,))))


def test_boundaries_never_move_backwards() -> None:
    with pytest.raises(ConfigurationError, match="backwards"):
        history(1, 10, 5)


def test_a_message_belongs_to_the_greatest_revision_whose_boundary_is_at_or_before_it() -> None:
    h = history(1, 10, 10, 20)
    assert [h.at(s).key_id for s in (1, 9, 10, 19, 20, 10**9)] == [  # type: ignore[union-attr]
        "epoch-1",
        "epoch-1",
        "epoch-3",  # same-boundary entries collapse to the greatest revision
        "epoch-3",
        "epoch-4",
        "epoch-4",
    ]


@given(st.lists(st.integers(0, 50), min_size=1, max_size=8), st.integers(1, 500))
def test_at_agrees_with_a_linear_scan(steps: list[int], seq: int) -> None:
    boundaries = [1]
    for step in steps:
        boundaries.append(boundaries[-1] + step)
    h = history(*boundaries)
    expected = [e for e in h.epochs if e.effective_from_seq <= seq][-1]
    assert h.at(seq) == expected


def test_the_history_settles_only_sequences_before_its_newest_boundary() -> None:
    h = history(1, 10)
    assert h.covers(9) and not h.covers(10) and not h.covers(11)


def test_a_rotation_is_appended_at_the_given_boundary_with_the_next_revision() -> None:
    epoch = history(1).appended("epoch-2", (R3,), 42)
    assert (epoch.revision, epoch.effective_from_seq, epoch.recipients) == (1, 42, (R3,))


def test_a_rotation_refuses_a_null_boundary() -> None:
    with pytest.raises(ConfigurationError, match="exhausted"):
        history(1).appended("epoch-2", (R3,), None)


def test_a_rotation_is_never_retroactive() -> None:
    with pytest.raises(ConfigurationError, match="never retroactive"):
        history(1, 30).appended("epoch-3", (R3,), 29)


def test_a_rotation_refuses_a_key_id_already_used() -> None:
    with pytest.raises(ConfigurationError, match="already names an epoch"):
        history(1, 30).appended("epoch-1", (R3,), 40)


def test_a_plaintext_team_has_nothing_to_rotate_from() -> None:
    with pytest.raises(ConfigurationError, match="no age-v1 epoch"):
        EpochHistory(()).appended("epoch-1", (R1,), 1)


def test_the_history_is_bounded_to_the_profiles_limit_of_boundaries() -> None:
    full = history(*range(1, MAX_KEY_EPOCHS + 1))
    with pytest.raises(ConfigurationError, match="profile bound"):
        full.appended("epoch-x", (R1,), MAX_KEY_EPOCHS + 1)
    # a same-boundary change adds no boundary and stays allowed
    assert full.appended("epoch-y", (R1,), MAX_KEY_EPOCHS).revision == MAX_KEY_EPOCHS


def test_a_snapshot_round_trips_through_its_canonical_bytes() -> None:
    original = snapshot(history(1, 10))
    again = EpochSnapshot.decode(original.encode())
    assert again == original and again.digest() == original.digest()


def test_a_snapshot_never_carries_identity_paths() -> None:
    h = history(1).with_identity("epoch-1", "/secret/place/key")
    assert b"/secret/place" not in snapshot(h).encode()


def test_a_snapshot_that_is_not_canonical_is_refused() -> None:
    obj = json.loads(snapshot(history(1)).encode())
    with pytest.raises(ConfigurationError, match="canonical"):
        EpochSnapshot.decode(json.dumps(obj, indent=1).encode())


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("format", "other", "not a syncengine-epoch-snapshot"),
        ("profile", "age-v2", "profile must be"),
        ("epochs", [], "non-empty list"),
        ("extra", 1, "unexpected fields"),
    ],
)
def test_a_snapshot_with_a_wrong_field_is_refused_naming_it(
    field: str, value: object, rule: str
) -> None:
    obj = json.loads(snapshot(history(1)).encode())
    obj[field] = value
    with pytest.raises(ConfigurationError, match=rule):
        EpochSnapshot.decode(canonicalize(obj))


def test_a_snapshot_with_a_duplicate_recipient_is_refused() -> None:
    obj = json.loads(snapshot(history(1)).encode())
    obj["epochs"][0]["recipients"] = [R1, R1]
    with pytest.raises(ConfigurationError, match="recipients"):
        EpochSnapshot.decode(canonicalize(obj))


def test_a_snapshot_with_a_non_canonical_sequence_is_refused() -> None:
    obj = json.loads(snapshot(history(1, 10)).encode())
    obj["epochs"][1]["effective_from_seq"] = "010"
    with pytest.raises(ConfigurationError, match="canonical decimal"):
        EpochSnapshot.decode(canonicalize(obj))


def test_a_snapshot_extending_the_held_history_adds_only_the_new_epochs() -> None:
    added = snapshot(history(1, 10, 20)).extends(history(1, 10))
    assert [e.key_id for e in added] == ["epoch-3"]


def test_an_older_snapshot_is_never_imported() -> None:
    with pytest.raises(ConfigurationError, match="older snapshot"):
        snapshot(history(1)).extends(history(1, 10))


def test_a_snapshot_whose_past_differs_is_refused_as_divergent() -> None:
    other = EpochHistory((KeyEpoch(0, 1, "epoch-1", (R3,)), KeyEpoch(1, 10, "epoch-2", (R1,))))
    with pytest.raises(ConfigurationError, match="diverge"):
        snapshot(other).extends(history(1))


def test_identities_do_not_make_histories_diverge() -> None:
    held = history(1).with_identity("epoch-1", "/keys/mine")
    assert snapshot(history(1, 5)).extends(held)[0].key_id == "epoch-2"
