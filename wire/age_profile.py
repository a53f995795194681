"""The ``age-v1`` cipher profile: seal to an epoch manifest, open with one identity.

docs/spec/age-v1-profile.md; our conformance notes are specs/age-v1.md. The
profile registers itself with :mod:`wire.profiles` on import.

Open evaluates, in this order, and stops at the first failure (the profile's
failure table; dispatch has already handled envelope version, read policy and
unknown ciphers):

1. epoch policy, before any decryption: the outer ``key_id`` must equal the
   sequence-effective trusted epoch, else ``policy_violation``;
2. the decoded age file must fit min(1 MiB, ``max_blob_bytes``), else
   ``malformed`` (an outer-envelope rule, independent of keys);
3. the identity installed for that epoch, else ``pending_key``; exactly one
   identity is used: no trial decryption across epochs, no fallback;
4. header admission and age decryption (:mod:`wire.age_format`), then the
   frame split and a constant-time comparison of the whole received context
   with the one rebuilt from the trusted binding and outer envelope; any
   failure is ``authentication_failed``;
5. the manifest check, when the caller trusts a manifest for the epoch: the
   now authenticated header must hold exactly one X25519 stanza per
   recipient of it (GREASE aside), else ``manifest_mismatch`` — the profile's
   "fail closed on accidental manifest drift" (specs/age-v1.md);
6. only then the strict canonical message rules, else ``malformed``.

Seal is randomized and side-effect free: it encrypts one frame to every
recipient of the manifest and to no one else, checks the final age-file size
against the limit and returns the complete :class:`~wire.envelope.Envelope`.
"""

from __future__ import annotations

import functools
import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from wire import age_format
from wire.age_format import AgeDecryptError, AgeFormatError
from wire.age_frame import FrameError, build_context, encode_frame, split_frame
from wire.age_keys import AgeKeyError, X25519Identity, X25519Recipient, parse_identity_file
from wire.envelope import Envelope
from wire.errors import EnvelopeError, ProfileError, ScalarError, WireError
from wire.limits import MAX_BLOB_BYTES, PROTOCOL_VERSION
from wire.message import Message
from wire.outcome import Blocked, BlockState, Importable, OpenOutcome
from wire.profiles import Binding, OpenContext, SealParams, register_profile
from wire.scalars import check_profile_key_id, check_uuid4, check_uuid7

__all__ = [
    "CIPHER",
    "MAX_RECIPIENTS",
    "PROFILE",
    "AgeV1Profile",
    "EpochManifest",
    "install_identity",
    "make_open_context",
    "make_seal_params",
    "parse_recipients_file",
    "seal_canonical",
    "x25519_stanza_count",
]

CIPHER = "age-v1"
MAX_RECIPIENTS = 256


@functools.lru_cache(maxsize=4096)
def _recipient(text: str) -> X25519Recipient:
    """Parse an ``age1…`` string once; manifests are sealed to again and again."""
    return X25519Recipient.from_string(text)


@dataclass(frozen=True, slots=True)
class EpochManifest:
    """One immutable recipient-set epoch: its ``key_id`` and 1–256 distinct recipients.

    Profile "Recipient-set epochs": a writer encrypts to every recipient here
    and to no real recipient outside it.
    """

    key_id: str
    recipients: tuple[X25519Recipient, ...]

    @classmethod
    def from_strings(cls, key_id: str, recipients: Iterable[str]) -> EpochManifest:
        """Validate a manifest; the same (key_id, recipients) is parsed only once."""
        items = tuple(recipients)
        for index, text in enumerate(items):
            if not isinstance(text, str):
                raise ProfileError(f"recipients[{index}]", "must be an 'age1…' string")
        if not isinstance(key_id, str):
            raise ProfileError("key_id", "must be a string")
        return _manifest(key_id, items)

    @classmethod
    def _parse(cls, key_id: str, recipients: tuple[str, ...]) -> EpochManifest:
        try:
            check_profile_key_id(key_id, "key_id")
        except ScalarError as exc:
            raise ProfileError(exc.field, exc.rule) from None
        parsed: list[X25519Recipient] = []
        seen: set[bytes] = set()
        for index, text in enumerate(recipients):
            try:
                recipient = _recipient(text)
            except WireError as exc:
                raise ProfileError(f"recipients[{index}]", exc.rule) from None
            if recipient.public_bytes in seen:
                raise ProfileError(f"recipients[{index}]", "recipients must be distinct")
            seen.add(recipient.public_bytes)
            parsed.append(recipient)
        if not 1 <= len(parsed) <= MAX_RECIPIENTS:
            raise ProfileError("recipients", "an epoch manifest has 1-256 recipients")
        return cls(key_id, tuple(parsed))

    def contains(self, recipient: X25519Recipient) -> bool:
        return any(r.public_bytes == recipient.public_bytes for r in self.recipients)


@functools.lru_cache(maxsize=256)
def _manifest(key_id: str, recipients: tuple[str, ...]) -> EpochManifest:
    # Errors are not cached (lru_cache only stores returned values).
    return EpochManifest._parse(key_id, recipients)


def install_identity(manifest: EpochManifest, identity_file: bytes) -> X25519Identity:
    """Validate an identity file for an epoch (profile "Key bootstrap").

    The file must hold exactly one native identity, and the recipient derived
    from it must be in the epoch's manifest; otherwise the key is refused and
    the epoch stays without an identity (``pending_key``).
    """
    identity = parse_identity_file(identity_file)
    if not manifest.contains(identity.recipient):
        raise AgeKeyError(
            "identity_file", f"its recipient is not in the manifest of epoch {manifest.key_id!r}"
        )
    return identity


def parse_recipients_file(data: bytes) -> tuple[str, ...]:
    """Recipients-file text: one ``age1…`` per line, blank lines and ``#`` comments."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise ProfileError("recipients_file", "must be ASCII text") from None
    out: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line or line.startswith("#"):
            continue
        try:
            out.append(_recipient(line).to_string())
        except WireError as exc:
            raise ProfileError(f"recipients_file:{number}", exc.rule) from None
    return tuple(out)


def make_seal_params(
    *,
    team_id: str,
    wire_id: str,
    key_id: str,
    recipients: Sequence[str],
    protocol_version: int = PROTOCOL_VERSION,
    max_blob_bytes: int = MAX_BLOB_BYTES,
) -> SealParams:
    """Seal parameters for ``age-v1``, validated now so errors name the option."""
    manifest = EpochManifest.from_strings(key_id, recipients)
    binding = _checked_binding(Binding(team_id, wire_id, protocol_version))
    return SealParams(
        binding=binding,
        key_id=manifest.key_id,
        recipients=tuple(r.to_string() for r in manifest.recipients),
        max_blob_bytes=max_blob_bytes,
    )


def make_open_context(
    *,
    team_id: str,
    wire_id: str,
    trusted_key_id: str,
    identity_file: bytes | None,
    recipients: Sequence[str] | None = None,
    protocol_version: int = PROTOCOL_VERSION,
    max_blob_bytes: int = MAX_BLOB_BYTES,
) -> OpenContext:
    """An open context with at most one identity, installed for ``trusted_key_id``.

    With ``recipients`` (the epoch manifest) the identity must belong to it.
    Without an identity file the context opens to ``pending_key``. With
    ``recipients`` the header is also checked against the manifest.
    """
    binding = _checked_binding(Binding(team_id, wire_id, protocol_version))
    try:
        check_profile_key_id(trusted_key_id, "trusted_key_id")
    except ScalarError as exc:
        raise ProfileError(exc.field, exc.rule) from None
    identities: dict[str, object] = {}
    manifests: dict[str, tuple[str, ...]] = {}
    if recipients is not None:
        manifest = EpochManifest.from_strings(trusted_key_id, recipients)
        manifests[trusted_key_id] = tuple(r.to_string() for r in manifest.recipients)
    if identity_file is not None:
        if recipients is not None:
            identities[trusted_key_id] = install_identity(manifest, identity_file)
        else:
            identities[trusted_key_id] = parse_identity_file(identity_file)
    return OpenContext(
        binding=binding,
        trusted_key_id=trusted_key_id,
        identities=identities,
        max_blob_bytes=max_blob_bytes,
        manifests=manifests,
    )


def _checked_binding(binding: Binding | None) -> Binding:
    if binding is None:
        raise ProfileError("binding", "age-v1 needs the trusted team_id and wire_id")
    try:
        check_uuid7(binding.team_id, "binding.team_id")
        check_uuid4(binding.wire_id, "binding.wire_id")
    except ScalarError as exc:
        raise ProfileError(exc.field, exc.rule) from None
    version = binding.protocol_version
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= 2**32 - 1:
        raise ProfileError("binding.protocol_version", "must be an unsigned 32-bit integer")
    return binding


# Placeholders that only fill the slots of build_context's output that the
# callers below slice away; they are valid, so build_context never refuses them.
_SLOT_UUID4 = "00000000-0000-4000-8000-000000000000"
_SLOT_UUID7 = "00000000-0000-7000-8000-000000000000"
_SLOT_KEY_ID = "k"
#: build_context's layout: u32 version (4) ‖ team_id (16) ‖ wire_id (16) ‖ the rest.
_TEAM_END = 20
_WIRE_END = 36


@functools.lru_cache(maxsize=256, typed=True)
def _team_head(protocol_version: int, team_id: str) -> bytes | None:
    """``u32 version ‖ team_id`` of a context, or ``None`` if either is invalid.

    Cached (typed, so ``True`` is not taken for ``1``): a store seals for one
    team and version, and both are plain immutable values, so a hit is the
    same answer a recomputation would give. ``None`` only sends the caller
    to :func:`_checked_binding`, which names the broken rule.
    """
    if isinstance(protocol_version, bool) or not isinstance(protocol_version, int):
        return None
    if not 0 <= protocol_version <= 2**32 - 1:
        return None
    try:
        check_uuid7(team_id, "binding.team_id")
    except ScalarError:
        return None
    context = build_context(protocol_version, team_id, _SLOT_UUID4, CIPHER, _SLOT_KEY_ID)
    return context[:_TEAM_END]


@functools.lru_cache(maxsize=256)
def _context_tail(key_id: str) -> bytes:
    """The context bytes after the wire ID (cipher and key_id, length-prefixed),
    for a key_id the manifest has already admitted; cached per epoch."""
    context = build_context(0, _SLOT_UUID7, _SLOT_UUID4, CIPHER, key_id)
    return context[_WIRE_END:]


def _seal_binding_head(binding: Binding | None) -> bytes:
    """The first 36 context bytes of a seal, enforcing :func:`_checked_binding`'s rules.

    Profile "Canonical authenticated binding context": the same bytes
    :func:`~wire.age_frame.build_context` writes (a property test holds them
    equal). The team part is cached; the wire ID, new for every message, is
    checked (UUIDv4) and converted each time. On any doubt the full check
    runs and raises exactly the error it always raised, in its order.
    """
    if binding is not None:
        try:
            head = _team_head(binding.protocol_version, binding.team_id)
        except TypeError:  # an unhashable field: the full check names it
            head = None
        wire_id = binding.wire_id
        if head is not None and isinstance(wire_id, str):
            try:
                check_uuid4(wire_id, "binding.wire_id")
            except ScalarError:
                pass
            else:
                return head + bytes.fromhex(wire_id.replace("-", ""))
    checked = _checked_binding(binding)
    context = build_context(
        checked.protocol_version, checked.team_id, checked.wire_id, CIPHER, _SLOT_KEY_ID
    )
    return context[:_WIRE_END]  # pragma: no cover - the fast path admits every valid binding


class AgeV1Profile:
    """The registered ``age-v1`` profile object."""

    name = CIPHER

    def seal(self, message: Message, params: SealParams) -> Envelope:
        # The checks run in the documented order: binding, key_id, manifest.
        head = _seal_binding_head(params.binding)
        if params.key_id is None:
            raise ProfileError("key_id", "age-v1 requires the epoch key_id")
        manifest = EpochManifest.from_strings(params.key_id, params.recipients)
        return _seal_frame(head, manifest, message.to_jcs(), params.max_blob_bytes)

    def open(self, envelope: Envelope, ctx: OpenContext) -> OpenOutcome:
        binding = _checked_binding(ctx.binding)
        if envelope.cipher != CIPHER:
            reason = f"cipher {envelope.cipher!r} is not age-v1"
            return Blocked(BlockState.UNSUPPORTED_CIPHER, reason)
        key_id = envelope.key_id
        trusted = ctx.trusted_key_id if ctx.trusted_key_id is not None else key_id
        if key_id is None or key_id != trusted:
            return Blocked(
                BlockState.POLICY_VIOLATION,
                "envelope key_id differs from the epoch effective at this sequence",
            )
        try:
            check_profile_key_id(key_id, "envelope.key_id")
        except ScalarError as exc:
            return Blocked(BlockState.MALFORMED, str(exc))
        return _open_checked(
            envelope, key_id, binding, ctx.identities, ctx.max_blob_bytes, ctx.manifests
        )


def seal_canonical(
    plaintext: bytes, binding: Binding, manifest: EpochManifest, max_blob_bytes: int
) -> Envelope:
    """:meth:`AgeV1Profile.seal` of the message whose RFC 8785 bytes are
    ``plaintext``, to an already parsed ``manifest``: the same binding rule,
    frame, age file and size limit, without rebuilding the :class:`Message`.

    For a caller that seals many messages of one epoch and has judged each
    plaintext by the message rules itself (``prepare_push`` writes the
    canonical bytes as :meth:`Message.to_jcs` does); ``plaintext`` is sealed
    as given, so bytes that are not a valid canonical message must never
    reach it (a receiver would quarantine them as ``malformed``).
    """
    return _seal_frame(_seal_binding_head(binding), manifest, plaintext, max_blob_bytes)


def _seal_frame(
    head: bytes, manifest: EpochManifest, plaintext: bytes, max_blob_bytes: int
) -> Envelope:
    context = head + _context_tail(manifest.key_id)
    frame = encode_frame(context, plaintext)
    data = age_format.encrypt(frame, manifest.recipients)
    limit = min(max_blob_bytes, MAX_BLOB_BYTES)
    if len(data) > limit:
        raise ProfileError(
            "message", f"the sealed age file is {len(data)} bytes; the blob limit is {limit}"
        )
    try:
        return Envelope.from_blob_bytes(CIPHER, manifest.key_id, data, max_blob_bytes=limit)
    except EnvelopeError as exc:  # pragma: no cover - guarded above
        raise ProfileError(exc.field, exc.rule) from None


def _open_checked(
    envelope: Envelope,
    key_id: str,
    binding: Binding,
    identities: Mapping[str, object],
    max_blob_bytes: int,
    manifests: Mapping[str, tuple[str, ...]],
) -> OpenOutcome:
    try:
        data = envelope.blob_bytes()
    except WireError as exc:
        return Blocked(BlockState.MALFORMED, str(exc))
    limit = min(max_blob_bytes, MAX_BLOB_BYTES)
    if len(data) > limit:
        return Blocked(BlockState.MALFORMED, f"age file exceeds the blob limit of {limit} bytes")
    identity = identities.get(key_id)
    if identity is None:
        return Blocked(BlockState.PENDING_KEY, f"no identity installed for epoch {key_id!r}")
    if not isinstance(identity, X25519Identity):
        raise TypeError("age-v1 identities must be X25519Identity objects")
    try:
        frame = age_format.decrypt(data, identity)
        received, message_bytes = split_frame(frame)
    except (AgeFormatError, AgeDecryptError, FrameError) as exc:
        return Blocked(BlockState.AUTHENTICATION_FAILED, str(exc))
    try:
        expected = build_context(
            binding.protocol_version, binding.team_id, binding.wire_id, envelope.cipher, key_id
        )
    except FrameError as exc:  # pragma: no cover - binding and key_id were checked
        return Blocked(BlockState.AUTHENTICATION_FAILED, str(exc))
    # Lengths are public; the bytes are compared in constant time, all of them.
    if len(received) != len(expected) or not hmac.compare_digest(received, expected):
        return Blocked(
            BlockState.AUTHENTICATION_FAILED,
            "frame context does not match the trusted binding and outer envelope",
        )
    recipients = manifests.get(key_id)
    if recipients is not None:
        expected_count = len(EpochManifest.from_strings(key_id, recipients).recipients)
        found = x25519_stanza_count(data)
        if found != expected_count:
            return Blocked(
                BlockState.MANIFEST_MISMATCH,
                f"the age header has {found} X25519 recipient stanza(s), but epoch {key_id!r} "
                f"has {expected_count} recipient(s): the writer sealed to another recipient set",
            )
    try:
        return Importable(Message.from_jcs(message_bytes))
    except WireError as exc:
        return Blocked(BlockState.MALFORMED, str(exc))


def x25519_stanza_count(data: bytes) -> int:
    """How many X25519 stanzas the header of ``data`` holds — for a file whose
    header :func:`wire.age_format.decrypt` has already admitted.

    Counted on the bytes, not by parsing the header again (that would cost a
    sixth of a decryption): in an admitted header a stanza starts a line with
    ``-> ``, an X25519 one with ``-> X25519 `` (a GREASE tag ends ``-grease``,
    and a body line is unpadded base64, which has no ``-``), and the first
    line that starts with ``---`` is the MAC line that ends the header. A
    property test holds this equal to the parser's count.
    """
    end = data.find(b"\n---")
    return data.count(b"\n-> X25519 ", 0, end if end >= 0 else len(data))


PROFILE = AgeV1Profile()
register_profile(PROFILE)
