"""wire: the sealed-envelope codec, pure and I/O-free.

It knows nothing of storage or HTTP transport: it turns values into
canonical bytes and back, and says precisely why bytes are refused.
See ``specs/wire.md``.
"""

from typing import TYPE_CHECKING

from wire.lazy import lazy_exports

if TYPE_CHECKING:
    from wire.envelope import Envelope
    from wire.errors import (
        CanonicalJsonError,
        EnvelopeError,
        MessageError,
        ProfileError,
        ProtocolError,
        ScalarError,
        SchemaError,
        WireError,
    )
    from wire.message import Message
    from wire.outcome import Blocked, BlockState, Importable, OpenOutcome
    from wire.profiles import Binding, OpenContext, SealParams, open_envelope, seal

__all__ = [
    "Binding",
    "BlockState",
    "Blocked",
    "CanonicalJsonError",
    "Envelope",
    "EnvelopeError",
    "Importable",
    "Message",
    "MessageError",
    "OpenContext",
    "OpenOutcome",
    "ProfileError",
    "ProtocolError",
    "ScalarError",
    "SchemaError",
    "SealParams",
    "WireError",
    "open_envelope",
    "seal",
]

# Resolved on first use (PEP 562): a storage-driver call imports only
# ``wire.errors`` and ``wire.scalars``, not the whole codec.
_EXPORTS = {
    "Envelope": "wire.envelope",
    "Message": "wire.message",
    "Blocked": "wire.outcome",
    "BlockState": "wire.outcome",
    "Importable": "wire.outcome",
    "OpenOutcome": "wire.outcome",
    "Binding": "wire.profiles",
    "OpenContext": "wire.profiles",
    "SealParams": "wire.profiles",
    "open_envelope": "wire.profiles",
    "seal": "wire.profiles",
    **dict.fromkeys(
        (
            "CanonicalJsonError",
            "EnvelopeError",
            "MessageError",
            "ProfileError",
            "ProtocolError",
            "ScalarError",
            "SchemaError",
            "WireError",
        ),
        "wire.errors",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
