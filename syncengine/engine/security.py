"""Write and read policy: server policy history ∩ local security history ∩ codec.

server/spec/v1.md "GET /v1/capabilities" and "Pull state layers":

- every binding pins an append-only **local security history**; revision 0
  is effective from sequence 1 with an explicit operator choice, and a
  change is appended at the capability snapshot's ``next_sequence_boundary``
  (prospective: earlier plaintext keeps its earlier policy). Same-boundary
  changes collapse to the greatest revision; at most 4096 distinct
  boundaries; a null boundary refuses the change;
- the **write set** for new envelopes is the server's current
  ``write_allowed_ciphers`` ∩ the ciphers this build implements ∩ the
  ciphers the local minimum at ``next_sequence_boundary`` admits. Empty is
  a terminal configuration state — never a reason to downgrade;
- a pulled envelope at sequence ``S`` may be opened only with a cipher both
  the server policy effective at ``S`` and the local minimum effective at
  ``S`` admit; anything else is ``policy_violation`` and is never decrypted.

Everything here is pure: values in, decisions out.
"""

from __future__ import annotations

import bisect
import enum
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from syncengine.engine.errors import ConfigurationError
from syncengine.engine.limits import MAX_LOCAL_SECURITY_HISTORY
from wire.limits import ENVELOPE_VERSION

if TYPE_CHECKING:
    # Annotations only: ``status`` reads the security history without the
    # capability document's module.
    from wire.http_v1.capabilities import Capabilities, PolicyEntry

__all__ = [
    "AGE_V1",
    "NONE",
    "ReadPolicy",
    "SecurityEntry",
    "SecurityHistory",
    "SecurityMode",
    "WritePlan",
    "plan_write",
    "read_policy",
]

NONE = "none"
AGE_V1 = "age-v1"


class SecurityMode(enum.StrEnum):
    """The v1 local minimum security modes."""

    PLAINTEXT_ALLOWED = "plaintext-allowed"
    E2EE_REQUIRED = "e2ee-required"

    def admits(self, cipher: str) -> bool:
        """``e2ee-required`` excludes exactly ``none`` (v1.md)."""
        return not (self is SecurityMode.E2EE_REQUIRED and cipher == NONE)


@dataclass(frozen=True, slots=True)
class SecurityEntry:
    revision: int
    effective_from_seq: int
    mode: SecurityMode


def _boundary(entry: SecurityEntry) -> int:
    return entry.effective_from_seq


@dataclass(frozen=True, slots=True)
class SecurityHistory:
    """The durable local security history of one binding, ascending by revision."""

    entries: tuple[SecurityEntry, ...]

    def __post_init__(self) -> None:
        first = self.entries[0] if self.entries else None
        if first is None or (first.revision, first.effective_from_seq) != (0, 1):
            raise ConfigurationError(
                "the local security history must start with revision 0 effective from 1"
            )
        for before, entry in zip(self.entries, self.entries[1:], strict=False):
            if entry.revision != before.revision + 1:
                raise ConfigurationError("local security revisions must ascend by one")
            if entry.effective_from_seq < before.effective_from_seq:
                raise ConfigurationError("local security boundaries never move backwards")

    @classmethod
    def initial(cls, mode: SecurityMode) -> SecurityHistory:
        return cls((SecurityEntry(0, 1, mode),))

    @property
    def current(self) -> SecurityEntry:
        return self.entries[-1]

    def at(self, seq: int) -> SecurityEntry:
        """The entry effective at ``seq``: greatest revision with boundary ≤ seq.

        Boundaries never move backwards, so the last entry with boundary ≤
        ``seq`` is the greatest revision; found by binary search.
        """
        index = bisect.bisect_right(self.entries, seq, key=_boundary)
        return self.entries[max(index, 1) - 1]

    def distinct_boundaries(self) -> int:
        return len({entry.effective_from_seq for entry in self.entries})

    def appended(self, mode: SecurityMode, boundary: int | None) -> SecurityHistory:
        """The history with ``mode`` appended at ``boundary`` (the snapshot's
        ``next_sequence_boundary``); refused atomically when impossible."""
        if boundary is None:
            raise ConfigurationError(
                "the team's sequence is exhausted: no boundary is left for a security change"
            )
        last = self.current
        if boundary < last.effective_from_seq:
            raise ConfigurationError(
                f"boundary {boundary} precedes the current entry's boundary "
                f"{last.effective_from_seq}; the relay's sequence went backwards"
            )
        fresh = boundary != last.effective_from_seq
        if fresh and self.distinct_boundaries() >= MAX_LOCAL_SECURITY_HISTORY:
            raise ConfigurationError(
                f"the local security history already has {MAX_LOCAL_SECURITY_HISTORY} "
                "boundaries (v1.md bound)"
            )
        entry = SecurityEntry(last.revision + 1, boundary, mode)
        return SecurityHistory((*self.entries, entry))


@dataclass(frozen=True, slots=True)
class WritePlan:
    """What prepare may mint now. ``cipher`` is ``None`` when nothing may be
    written (``allow_new=false``); ``reason`` then says why."""

    cipher: str | None
    allowed: tuple[str, ...]
    boundary: int | None
    local_revision: int
    policy_revision: int
    reason: str | None = None

    @property
    def allow_new(self) -> bool:
        return self.cipher is not None


def plan_write(
    caps: Capabilities,
    supported: Iterable[str],
    history: SecurityHistory,
    *,
    age_configured: bool,
) -> WritePlan:
    """Choose the cipher for new envelopes; prefer age-v1 when allowed and configured."""
    policy = caps.current_policy
    boundary = caps.next_sequence_boundary
    local = history.at(boundary) if boundary is not None else history.current
    local_supported = frozenset(supported)
    allowed = tuple(
        c for c in policy.write_allowed_ciphers if c in local_supported and local.mode.admits(c)
    )

    def plan(cipher: str | None, reason: str | None = None) -> WritePlan:
        return WritePlan(cipher, allowed, boundary, local.revision, policy.policy_revision, reason)

    if boundary is None:
        return plan(None, "the team's sequence is exhausted; no new message can be stored")
    if ENVELOPE_VERSION not in policy.accepted_envelope_versions:
        return plan(None, f"the relay no longer accepts envelope version {ENVELOPE_VERSION}")
    if AGE_V1 in allowed and age_configured:
        return plan(AGE_V1)
    if NONE in allowed:
        return plan(NONE)
    if AGE_V1 in allowed:
        return plan(
            None,
            "only age-v1 may be written but this device has no age-v1 epoch configured "
            "(connect with --key-id and --recipients-file)",
        )
    return plan(
        None,
        "the effective write set is empty: relay allows "
        f"{list(policy.write_allowed_ciphers)}, local minimum is {local.mode.value}",
    )


@dataclass(frozen=True, slots=True)
class ReadPolicy:
    """The policy a pulled envelope at one sequence is judged by."""

    allowed_ciphers: frozenset[str]
    policy_revision: int
    local_security_revision: int


def read_policy(caps: Capabilities, history: SecurityHistory, seq: int) -> ReadPolicy:
    """Server policy effective at ``seq`` ∩ local minimum effective at ``seq``.

    A sequence beyond the snapshot's history is judged by the last entry
    (the caller refreshes capabilities when a page passes ``current_seq``).
    """
    server = caps.policy_at(seq) or caps.policy_history[0]
    local = history.at(seq)
    return _combined(server, local)


@functools.lru_cache(maxsize=256)
def _combined(server: PolicyEntry, local: SecurityEntry) -> ReadPolicy:
    # Entries are frozen values: every envelope between two boundaries is
    # judged by one ReadPolicy object instead of a fresh one each.
    allowed = frozenset(c for c in server.write_allowed_ciphers if local.mode.admits(c))
    return ReadPolicy(allowed, server.policy_revision, local.revision)
