"""The ``none`` profile: the blob is the canonical plaintext message itself.

server/spec/v1.md "Message representation": ``key_id`` is null; the decoded
blob is exactly the RFC 8785 bytes of the message and must fit the smaller of
1 MiB and the team's ``max_blob_bytes``. Opening applies every plaintext rule
and maps any violation to ``malformed``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from wire.envelope import Envelope, encode_blob
from wire.errors import MessageError, ProfileError, SchemaError, WireError
from wire.limits import ENVELOPE_VERSION, MAX_BLOB_BYTES
from wire.message import Message
from wire.outcome import Blocked, BlockState, Importable, OpenOutcome

if TYPE_CHECKING:
    from collections.abc import Sequence

    from wire.profile_contract import OpenContext, SealParams

__all__ = ["CIPHER", "PROFILE", "NoneProfile", "open_canonical_page"]

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


def open_canonical_page(
    blobs: Sequence[bytes], max_blob_bytes: int = MAX_BLOB_BYTES
) -> list[Message | None]:
    """For each decoded blob, the message :meth:`NoneProfile.open` imports
    from it — or ``None`` where that is not plainly so (the caller then opens
    that envelope alone, which names the reason it blocks).

    A page's blobs are decoded as one JSON array, a single pass of the C
    decoder instead of one decoder call, one UTF-8 decode and one member
    check per message (issue #17). Nothing is taken on trust from that
    shared decode: element *i* is accepted only when the four members build
    a :class:`~wire.message.Message` — every plaintext rule of v1.md
    "Message representation" (body, timestamp, both names) is checked there
    — whose RFC 8785 bytes are exactly ``blobs[i]``. Those bytes decode to
    that very object with exactly those four members, so this is the
    message :meth:`Message.from_jcs` returns for ``blobs[i]``; anything else — a
    blob that does not decode on its own, a neighbour that shifts the array,
    extra or duplicate members, escapes other than the canonical ones — fails
    the byte comparison and falls back. A blob over the smaller of
    ``max_blob_bytes`` and 1 MiB is never accepted (``open`` refuses it).
    The caller still applies the envelope rules (version, policy, null
    ``key_id``) before asking.
    """
    limit = min(max_blob_bytes, MAX_BLOB_BYTES)
    try:
        values = json.loads((b"[" + b",".join(blobs) + b"]").decode("utf-8"))
    except (ValueError, RecursionError):
        return [None] * len(blobs)
    if type(values) is not list or len(values) != len(blobs):
        return [None] * len(blobs)
    opened: list[Message | None] = []
    for value, data in zip(values, blobs, strict=True):
        message = None
        if type(value) is dict and len(value) == 4 and len(data) <= limit:
            try:
                message = Message(
                    value["body"], value["created_at"], value["from_agent"], value["to_agent"]
                )
                if message.to_jcs() != data:
                    message = None
            except (KeyError, SchemaError, UnicodeError):
                message = None
        opened.append(message)
    return opened


PROFILE = NoneProfile()
