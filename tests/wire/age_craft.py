"""Test helper: craft age files with arbitrary stanzas and chunking.

The production writer only emits conforming files. To prove the reader refuses
each non-conforming shape *on its own merits* (not because of a bad MAC), this
helper builds files whose header MAC and payload are cryptographically valid
but whose structure breaks one rule at a time.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from wire import age_format as af
from wire.age_keys import X25519Recipient


def craft(
    plaintext: bytes,
    recipients: Sequence[X25519Recipient],
    *,
    extra_stanzas: Sequence[bytes] = (),
    extra_first: bool = False,
    chunks: Sequence[tuple[bytes, bool]] | None = None,
    trailing: bytes = b"",
) -> bytes:
    """A MAC-valid age file; ``extra_stanzas`` are raw stanza bytes inserted verbatim.

    ``chunks`` overrides the STREAM split: a list of (plaintext, last_flag).
    """
    file_key = os.urandom(16)
    x25519 = [af.encode_stanza(af._wrap(file_key, r)) for r in recipients]
    stanzas = [*extra_stanzas, *x25519] if extra_first else [*x25519, *extra_stanzas]
    mac_input = af.VERSION_LINE + b"".join(stanzas) + b"---"
    mac = af._header_mac(file_key, mac_input)
    nonce = os.urandom(16)
    key = af._hkdf(file_key, nonce, b"payload")
    if chunks is None:
        body = b"".join(af._stream_encrypt(key, plaintext))
    else:
        aead = ChaCha20Poly1305(key)
        body = b"".join(
            aead.encrypt(af._chunk_nonce(i, last), part, None)
            for i, (part, last) in enumerate(chunks)
        )
    return mac_input + b" " + af._b64encode_unpadded(mac) + b"\n" + nonce + body + trailing


def stanza(tag_and_args: str, body: bytes) -> bytes:
    """Raw stanza bytes in canonical wrapping (tag and args unchecked)."""
    words = tag_and_args.split(" ")
    return af.encode_stanza(af.Stanza(words[0], tuple(words[1:]), body))
