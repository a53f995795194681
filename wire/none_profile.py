"""The ``none`` profile: the blob is the canonical plaintext message itself.

server/spec/v1.md "Message representation": ``key_id`` is null; the decoded
blob is exactly the RFC 8785 bytes of the message and must fit the smaller of
1 MiB and the team's ``max_blob_bytes``. Opening applies every plaintext rule
and maps any violation to ``malformed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wire.envelope import Envelope, encode_blob
from wire.errors import MessageError, ProfileError, WireError
from wire.limits import ENVELOPE_VERSION, MAX_BLOB_BYTES
from wire.message import Message
from wire.outcome import Blocked, BlockState, Importable, OpenOutcome

if TYPE_CHECKING:
    from wire.profile_contract import OpenContext, SealParams

__all__ = ["CIPHER", "PROFILE", "NoneProfile"]

CIPHER = "none"


class NoneProfile:
    """Plaintext sealing: canonical bytes in, canonical bytes out."""

    name = CIPHER

    def seal(self, message: Message, params: SealParams) -> Envelope:
        if params.key_id is not None:
            raise ProfileError("key_id", "the none profile requires a null key_id")
        data = message.to_jcs()
        limit = min(params.max_blob_bytes, MAX_BLOB_BYTES)
        if len(data) > limit:
            raise ProfileError(
                "message", f"canonical plaintext is {len(data)} bytes; the blob limit is {limit}"
            )
        # Cipher and key_id are this profile's constants and the size was
        # checked above, so the envelope is built without re-validation.
        return Envelope(ENVELOPE_VERSION, CIPHER, None, encode_blob(data), data)

    def open(self, envelope: Envelope, ctx: OpenContext) -> OpenOutcome:
        if envelope.key_id is not None:
            return Blocked(BlockState.MALFORMED, "the none profile requires a null key_id")
        try:
            data = envelope.blob_bytes()
            if len(data) > min(ctx.max_blob_bytes, MAX_BLOB_BYTES):
                return Blocked(BlockState.MALFORMED, "blob exceeds the team's max_blob_bytes")
            return Importable(Message.from_jcs(data))
        except MessageError as exc:
            return Blocked(BlockState.MALFORMED, str(exc))
        except WireError as exc:
            return Blocked(BlockState.MALFORMED, str(exc))


PROFILE = NoneProfile()
