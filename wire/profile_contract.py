"""The cipher-profile contract: what a profile is given and what it provides.

:class:`CipherProfile` is the interface every profile implements;
:class:`SealParams` and :class:`OpenContext` are what it is handed to seal
and to open one message, and :class:`Binding` is the trusted context an
authenticated profile binds to. They live apart from the dispatch in
:mod:`wire.profiles` (which re-exports them) so that a profile module, such
as :mod:`wire.none_profile`, can name them without importing the dispatch
that registers it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from wire.envelope import Envelope
from wire.limits import MAX_BLOB_BYTES, PROTOCOL_VERSION
from wire.message import Message
from wire.outcome import OpenOutcome

__all__ = ["Binding", "CipherProfile", "OpenContext", "SealParams"]


@dataclass(frozen=True, slots=True)
class Binding:
    """The independently trusted context an authenticated profile binds to.

    It comes from local state (the store's binding and the wire ID it
    reserved or pulled), never from the ciphertext being checked.
    """

    team_id: str
    wire_id: str
    protocol_version: int = PROTOCOL_VERSION


@dataclass(frozen=True, slots=True)
class SealParams:
    """Everything a profile may need to seal one message."""

    binding: Binding | None = None
    key_id: str | None = None
    #: Recipient strings of the epoch manifest (age-v1: ``age1…``).
    recipients: tuple[str, ...] = ()
    max_blob_bytes: int = MAX_BLOB_BYTES


@dataclass(frozen=True, slots=True)
class OpenContext:
    """What the reader trusts when opening one envelope.

    ``allowed_ciphers`` is the effective read policy at the envelope's
    sequence (server policy history ∩ local security history); ``None``
    means the caller evaluated policy elsewhere. ``trusted_key_id`` is the
    sequence-effective epoch; ``None`` means the envelope's own key_id.
    ``identities`` maps an epoch key_id to the profile's identity object.
    ``manifests`` maps an epoch key_id to its trusted recipient manifest
    (age-v1: ``age1…`` strings); a profile checks the header against it
    where it has one (issue #34), and skips the check where it has none.
    """

    binding: Binding | None = None
    allowed_ciphers: frozenset[str] | None = None
    trusted_key_id: str | None = None
    identities: Mapping[str, object] = field(default_factory=dict)
    max_blob_bytes: int = MAX_BLOB_BYTES
    manifests: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class CipherProfile(Protocol):
    """A cipher profile: a pure seal and a total open (never raises on input)."""

    name: str

    def seal(self, message: Message, params: SealParams) -> Envelope: ...

    def open(self, envelope: Envelope, ctx: OpenContext) -> OpenOutcome: ...
