"""``GET /v1/capabilities``: the team's write policy and its complete history.

server/spec/v1.md "GET /v1/capabilities" fixes these invariants, all checked
by :meth:`Capabilities.validate` (so the relay cannot build, and the client
cannot accept, a document that breaks one):

- the common binding members are present, and ``min_available_seq <=
  current_seq`` (the floor never passes the committed sequence);
- ``next_sequence_boundary`` is ``current_seq + 1``, or null exactly when
  ``current_seq`` is the signed 64-bit maximum;
- ``max_blob_bytes`` is a canonical decimal *string* in 1..1 MiB;
- ``policy_history`` holds 1..4096 entries, strictly ascending by
  ``policy_revision`` and by ``effective_from_seq`` (same-boundary entries are
  collapsed by the server, so a boundary never repeats); the first boundary
  is sequence 1 (a team's revision 0 is effective from 1 and collapse only
  replaces an entry by a later one at the *same* boundary); no boundary lies
  beyond the next sequence (a policy change takes effect at
  ``current_seq + 1``);
- the last history entry equals the current ``policy_revision``,
  ``effective_from_seq``, ``accepted_envelope_versions`` and
  ``write_allowed_ciphers`` exactly.

The typed value stores the history only; the current fields and the
boundary are derived from it, so a built document is consistent by
construction and a parsed one is checked against them.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from wire.errors import SchemaError
from wire.http_v1.binding import BINDING_MEMBERS, ResponseBinding
from wire.http_v1.limits import MAX_POLICY_HISTORY
from wire.limits import MAX_BLOB_BYTES, MAX_SEQ
from wire.scalars import check_cipher, format_seq, parse_seq
from wire.schema import expect_int, expect_list, expect_object, join_field

__all__ = ["Capabilities", "PolicyEntry"]

_U32_MAX = 2**32 - 1
_POLICY_MEMBERS = (
    "policy_revision",
    "effective_from_seq",
    "accepted_envelope_versions",
    "write_allowed_ciphers",
)
_CAPABILITY_MEMBERS = (
    *BINDING_MEMBERS,
    "current_seq",
    "next_sequence_boundary",
    *_POLICY_MEMBERS,
    "max_blob_bytes",
    "policy_history",
)


def _check_versions(versions: tuple[int, ...], field: str) -> None:
    if not versions:
        raise SchemaError(field, "must list at least one envelope version")
    for index, version in enumerate(versions):
        expect_int(version, join_field(field, index), minimum=1, maximum=_U32_MAX)
    if len(set(versions)) != len(versions):
        raise SchemaError(field, "envelope versions must be distinct")


def _check_ciphers(ciphers: tuple[str, ...], field: str) -> None:
    # May be empty: a team that admits no new writes is a legal (terminal
    # for writers) policy, and readers still need its history.
    for index, cipher in enumerate(ciphers):
        check_cipher(cipher, join_field(field, index))
    if len(set(ciphers)) != len(ciphers):
        raise SchemaError(field, "ciphers must be distinct")


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    """One effective server write policy, from ``effective_from_seq`` onwards."""

    policy_revision: int
    effective_from_seq: int
    accepted_envelope_versions: tuple[int, ...]
    write_allowed_ciphers: tuple[str, ...]

    def validate(self, field: str) -> PolicyEntry:
        format_seq(self.policy_revision, join_field(field, "policy_revision"))
        format_seq(self.effective_from_seq, join_field(field, "effective_from_seq"))
        if self.effective_from_seq < 1:
            raise SchemaError(
                join_field(field, "effective_from_seq"), "sequences begin at 1; a boundary is >= 1"
            )
        _check_versions(
            self.accepted_envelope_versions, join_field(field, "accepted_envelope_versions")
        )
        _check_ciphers(self.write_allowed_ciphers, join_field(field, "write_allowed_ciphers"))
        return self

    def to_obj(self) -> dict[str, Any]:
        return {
            "policy_revision": format_seq(self.policy_revision),
            "effective_from_seq": format_seq(self.effective_from_seq),
            "accepted_envelope_versions": list(self.accepted_envelope_versions),
            "write_allowed_ciphers": list(self.write_allowed_ciphers),
        }

    @classmethod
    def read_members(cls, obj: dict[str, Any], field: str) -> PolicyEntry:
        """The four policy members, from a history entry or the current fields."""
        versions = expect_list(
            obj["accepted_envelope_versions"], join_field(field, "accepted_envelope_versions")
        )
        ciphers = expect_list(
            obj["write_allowed_ciphers"], join_field(field, "write_allowed_ciphers")
        )
        entry = cls(
            policy_revision=parse_seq(obj["policy_revision"], join_field(field, "policy_revision")),
            effective_from_seq=parse_seq(
                obj["effective_from_seq"], join_field(field, "effective_from_seq")
            ),
            accepted_envelope_versions=tuple(versions),
            write_allowed_ciphers=tuple(ciphers),
        )
        return entry.validate(field)

    @classmethod
    def from_obj(cls, value: Any, field: str) -> PolicyEntry:
        obj = expect_object(value, field, _POLICY_MEMBERS, closed=False)
        return cls.read_members(obj, field)


def _boundary(entry: PolicyEntry) -> int:
    return entry.effective_from_seq


@dataclass(frozen=True, slots=True)
class Capabilities:
    """One capability snapshot: binding, committed sequence, limits, policy history."""

    binding: ResponseBinding
    current_seq: int
    max_blob_bytes: int
    policy_history: tuple[PolicyEntry, ...]

    @property
    def current_policy(self) -> PolicyEntry:
        """The policy new writes face: the last history entry."""
        return self.policy_history[-1]

    @property
    def next_sequence_boundary(self) -> int | None:
        """Where a local security-mode change takes effect; ``None`` at the maximum."""
        return None if self.current_seq == MAX_SEQ else self.current_seq + 1

    def policy_at(self, seq: int) -> PolicyEntry | None:
        """The server policy effective at ``seq`` (greatest boundary ``<= seq``).

        A binary search: the history ascends by boundary and holds up to
        4,096 entries, and a pull asks once per envelope.
        """
        index = bisect.bisect_right(self.policy_history, seq, key=_boundary)
        return self.policy_history[index - 1] if index else None

    def validate(self, field: str = "capabilities") -> Capabilities:
        self.binding.validate(field)
        current = join_field(field, "current_seq")
        format_seq(self.current_seq, current)
        if self.binding.min_available_seq > self.current_seq:
            raise SchemaError(
                join_field(field, "min_available_seq"), "retention floor exceeds current_seq"
            )
        blob = join_field(field, "max_blob_bytes")
        expect_int(self.max_blob_bytes, blob)
        if not 1 <= self.max_blob_bytes <= MAX_BLOB_BYTES:
            raise SchemaError(blob, f"must be 1..{MAX_BLOB_BYTES} (the protocol maximum)")
        self._validate_history(join_field(field, "policy_history"))
        return self

    def _validate_history(self, field: str) -> None:
        history = self.policy_history
        if not 1 <= len(history) <= MAX_POLICY_HISTORY:
            raise SchemaError(field, f"must hold 1..{MAX_POLICY_HISTORY} entries")
        for index, entry in enumerate(history):
            entry.validate(join_field(field, index))
        if history[0].effective_from_seq != 1:
            raise SchemaError(
                join_field(join_field(field, 0), "effective_from_seq"),
                "the complete history starts at sequence 1",
            )
        for index in range(1, len(history)):
            before, entry = history[index - 1], history[index]
            at = join_field(field, index)
            if entry.policy_revision <= before.policy_revision:
                raise SchemaError(
                    join_field(at, "policy_revision"), "revisions must be strictly ascending"
                )
            if entry.effective_from_seq <= before.effective_from_seq:
                raise SchemaError(
                    join_field(at, "effective_from_seq"),
                    "boundaries must be strictly ascending (same-boundary entries collapse)",
                )
        last = history[-1].effective_from_seq
        if last > min(self.current_seq + 1, MAX_SEQ):
            raise SchemaError(
                join_field(join_field(field, len(history) - 1), "effective_from_seq"),
                "a policy boundary cannot lie beyond current_seq + 1",
            )

    def to_obj(self) -> dict[str, Any]:
        self.validate()
        boundary = self.next_sequence_boundary
        return {
            **self.binding.to_members(),
            "current_seq": format_seq(self.current_seq),
            "next_sequence_boundary": None if boundary is None else format_seq(boundary),
            **self.current_policy.to_obj(),
            "max_blob_bytes": format_seq(self.max_blob_bytes),
            "policy_history": [entry.to_obj() for entry in self.policy_history],
        }

    @classmethod
    def from_obj(cls, value: Any, field: str = "capabilities") -> Capabilities:
        obj = expect_object(value, field, _CAPABILITY_MEMBERS, closed=False)
        binding = ResponseBinding.from_members(obj, field)
        current_seq = parse_seq(obj["current_seq"], join_field(field, "current_seq"))
        max_blob = parse_seq(obj["max_blob_bytes"], join_field(field, "max_blob_bytes"))
        raw_history = expect_list(
            obj["policy_history"],
            join_field(field, "policy_history"),
            min_items=1,
            max_items=MAX_POLICY_HISTORY,
        )
        history = tuple(
            PolicyEntry.from_obj(item, join_field(join_field(field, "policy_history"), index))
            for index, item in enumerate(raw_history)
        )
        caps = cls(binding, current_seq, max_blob, history).validate(field)

        boundary_field = join_field(field, "next_sequence_boundary")
        raw_boundary = obj["next_sequence_boundary"]
        boundary = None if raw_boundary is None else parse_seq(raw_boundary, boundary_field)
        if boundary != caps.next_sequence_boundary:
            raise SchemaError(
                boundary_field, "must be current_seq + 1, or null exactly at the maximum"
            )
        current = PolicyEntry.read_members(obj, field)
        last = caps.current_policy
        for name in _POLICY_MEMBERS:
            if getattr(current, name) != getattr(last, name):
                raise SchemaError(
                    join_field(field, name), "must equal the last policy_history entry"
                )
        return caps
