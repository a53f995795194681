"""age X25519 recipients and identities, and the profile's identity-file rules.

A recipient is the public half (``age1…``), an identity the private half
(``AGE-SECRET-KEY-1…``), both Bech32 over 32 raw bytes (age-encryption.org/v1,
"X25519 recipients"). The age-v1 profile ("Key bootstrap and operational
limits") narrows identity files to exactly one uppercase native identity line;
blank lines and ``#`` comments are the only other content allowed.

Secrets: an :class:`X25519Identity` never prints its key (``repr`` is
redacted), and no error raised here quotes the input, because the input may be
a private key. Only :meth:`X25519Identity.to_secret_string` reveals it, for
writing an identity file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from wire import bech32
from wire.errors import ProfileError

__all__ = [
    "IDENTITY_HRP",
    "RECIPIENT_HRP",
    "AgeKeyError",
    "X25519Identity",
    "X25519Recipient",
    "parse_identity_file",
]

RECIPIENT_HRP = "age"
IDENTITY_HRP = "age-secret-key-"
_KEY_BYTES = 32
_IDENTITY_PREFIX = "AGE-SECRET-KEY-1"
_PLUGIN_IDENTITY_PREFIX = "AGE-PLUGIN-"


class AgeKeyError(ProfileError):
    """An age recipient, identity or identity file broke a rule."""


@dataclass(frozen=True, slots=True)
class X25519Recipient:
    """The public key a sealed file is encrypted to (``age1…``)."""

    public_bytes: bytes
    _key: X25519PublicKey = field(repr=False, compare=False, hash=False)

    @classmethod
    def from_public_bytes(cls, raw: bytes, *, field_name: str = "recipient") -> X25519Recipient:
        if len(raw) != _KEY_BYTES:
            raise AgeKeyError(field_name, "an X25519 recipient is exactly 32 bytes")
        return cls(bytes(raw), X25519PublicKey.from_public_bytes(raw))

    @classmethod
    def from_string(cls, text: str, *, field_name: str = "recipient") -> X25519Recipient:
        """Parse ``age1…``; only the lowercase form is accepted, as age writes it."""
        if text != text.lower():
            raise AgeKeyError(field_name, "an age recipient must be lowercase 'age1…'")
        hrp, raw = bech32.decode(text, field=field_name)
        if hrp != RECIPIENT_HRP:
            raise AgeKeyError(field_name, "an X25519 recipient must start with 'age1'")
        return cls.from_public_bytes(raw, field_name=field_name)

    def to_string(self) -> str:
        return bech32.encode(RECIPIENT_HRP, self.public_bytes)

    def public_key(self) -> X25519PublicKey:
        return self._key

    def __str__(self) -> str:
        return self.to_string()


@dataclass(frozen=True, slots=True, eq=False)
class X25519Identity:
    """A private X25519 key. Its public recipient is derived once and cached."""

    _key: X25519PrivateKey = field(repr=False)
    recipient: X25519Recipient

    @classmethod
    def generate(cls) -> X25519Identity:
        return cls._from_key(X25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, raw: bytes, *, field_name: str = "identity") -> X25519Identity:
        if len(raw) != _KEY_BYTES:
            raise AgeKeyError(field_name, "an X25519 identity is exactly 32 bytes")
        return cls._from_key(X25519PrivateKey.from_private_bytes(raw))

    @classmethod
    def from_string(cls, text: str, *, field_name: str = "identity") -> X25519Identity:
        """Parse ``AGE-SECRET-KEY-1…``; the profile requires the uppercase form."""
        if not text.startswith(_IDENTITY_PREFIX):
            raise AgeKeyError(field_name, "a native identity must start with 'AGE-SECRET-KEY-1'")
        if text != text.upper():
            raise AgeKeyError(field_name, "a native identity must be uppercase")
        hrp, raw = bech32.decode(text, field=field_name)
        if hrp != IDENTITY_HRP:  # pragma: no cover - the prefix check already implies it
            raise AgeKeyError(field_name, "a native identity must start with 'AGE-SECRET-KEY-1'")
        return cls.from_private_bytes(raw, field_name=field_name)

    @classmethod
    def _from_key(cls, key: X25519PrivateKey) -> X25519Identity:
        public = key.public_key()
        return cls(key, X25519Recipient(public.public_bytes_raw(), public))

    def private_key(self) -> X25519PrivateKey:
        return self._key

    def to_secret_string(self) -> str:
        """The ``AGE-SECRET-KEY-1…`` text. Handle as a secret: never log it."""
        return bech32.encode(IDENTITY_HRP, self._key.private_bytes_raw()).upper()

    def __repr__(self) -> str:
        return f"X25519Identity(recipient={self.recipient.to_string()!r})"


def parse_identity_file(data: bytes, *, field_name: str = "identity_file") -> X25519Identity:
    """Parse an identity file under the profile's rules.

    Exactly one line holds an uppercase ``AGE-SECRET-KEY-1…`` identity; every
    other line is empty or starts with ``#``. Surrounding whitespace (including
    carriage returns), plugin identities, armored or passphrase-encrypted files
    and a second identity are refused. Errors name the line number, never its
    content.
    """
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise AgeKeyError(field_name, "an identity file must be ASCII text") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it is not an empty line
    found: X25519Identity | None = None
    for number, line in enumerate(lines, start=1):
        if line == "" or line.startswith("#"):
            continue
        where = f"{field_name}:{number}"
        if line != line.strip() or "\r" in line:
            raise AgeKeyError(where, "identity lines must not have surrounding whitespace")
        if line.startswith(_PLUGIN_IDENTITY_PREFIX):
            raise AgeKeyError(where, "plugin identities are not allowed by age-v1")
        if not line.startswith(_IDENTITY_PREFIX):
            raise AgeKeyError(
                where, "only blank lines, '#' comments and one AGE-SECRET-KEY-1 line are allowed"
            )
        if found is not None:
            raise AgeKeyError(where, "an identity file holds exactly one identity")
        found = X25519Identity.from_string(line, field_name=where)
    if found is None:
        raise AgeKeyError(field_name, "an identity file holds exactly one identity; found none")
    return found
