"""wire: the sealed-envelope codec, pure and I/O-free.

It knows nothing of storage or HTTP transport: it turns values into
canonical bytes and back, and says precisely why bytes are refused.
See ``specs/wire.md``.
"""

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
