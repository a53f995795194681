"""The single exception hierarchy of :mod:`wire`.

Every error names the offending field (a dotted path such as
``envelope.blob``) and the rule it broke, so callers can show an operator
exactly what is wrong without echoing the offending value (which may be a
secret or a large blob)::

    WireError
    ├── CanonicalJsonError   bytes are not strict / canonical JSON (RFC 8785)
    ├── SchemaError          a JSON value has the wrong shape for its schema
    │   ├── ScalarError      a canonical scalar (sequence, UUID, time, name) is invalid
    │   ├── EnvelopeError    the sealed envelope {v, cipher, key_id, blob} is invalid
    │   └── MessageError     the plaintext message {body, created_at, from_agent, to_agent}
    ├── ProfileError         a cipher profile cannot seal or open (usage, limits)
    └── ProtocolError        an HTTP v1 error envelope, parsed (status, code, details)
"""

from __future__ import annotations

from collections.abc import Mapping


class WireError(Exception):
    """Base of every codec error: ``field`` is where, ``rule`` is what broke."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}" if field else rule)
        self.field = field
        self.rule = rule


class CanonicalJsonError(WireError):
    """Input is not strict JSON, or not the canonical RFC 8785 form required."""


class SchemaError(WireError):
    """A decoded JSON value does not have the shape its schema demands."""


class ScalarError(SchemaError):
    """A canonical protocol scalar (server/spec/v1.md "Scope and conventions")."""


class EnvelopeError(SchemaError):
    """The outer sealed envelope breaks a rule of v1.md "Message representation"."""


class MessageError(SchemaError):
    """The plaintext message object breaks a rule of the ``none`` plaintext format."""


class ProfileError(WireError):
    """A cipher profile refused to seal (size limit, bad recipients, bad key)."""


class ProtocolError(WireError):
    """A relay error response: HTTP ``status``, machine ``code`` and ``details``.

    Clients branch on ``code`` only (v1.md "Common response fields"); the
    human ``message`` is kept for display.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str = "",
        details: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__("error.code", f"HTTP {status} {code}: {message}".rstrip(": "))
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, object] = dict(details or {})
