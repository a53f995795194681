"""Cipher-profile dispatch: one place decides which profile seals or opens.

An envelope names its profile in ``cipher``. Opening evaluates, in order,
everything that must hold *before* any profile code touches the blob
(docs/spec/age-v1-profile.md: policy and epoch checks precede decryption;
v1.md "Pull state layers": an unknown cipher is quarantined unchanged):

1. an envelope version other than 1 → ``unsupported_cipher``;
2. a cipher outside the caller's effective policy at the message's sequence
   → ``policy_violation`` (never decrypted);
3. no implementation of the cipher → ``unsupported_cipher``;
4. the profile's own open.

Profiles are looked up in a registry; ``age-v1`` lives in its own module and
is imported on first use so the plaintext path does not pay for it.
"""

from __future__ import annotations

import importlib
import importlib.util

from wire import none_profile as _none_profile
from wire.envelope import Envelope
from wire.errors import ProfileError
from wire.limits import ENVELOPE_VERSION
from wire.message import Message
from wire.outcome import Blocked, BlockState, OpenOutcome
from wire.profile_contract import Binding, CipherProfile, OpenContext, SealParams

__all__ = [
    "Binding",
    "CipherProfile",
    "OpenContext",
    "SealParams",
    "get_profile",
    "open_envelope",
    "register_profile",
    "seal",
    "supported_ciphers",
]


_REGISTRY: dict[str, CipherProfile] = {}
# Profiles imported on first use; the module registers itself on import.
_LAZY_MODULES: dict[str, str] = {"age-v1": "wire.age_profile"}
# The third-party libraries a lazy profile's module imports.
_LAZY_REQUIRES: dict[str, tuple[str, ...]] = {"age-v1": ("cryptography",)}


def register_profile(profile: CipherProfile) -> None:
    _REGISTRY[profile.name] = profile


def get_profile(cipher: str) -> CipherProfile | None:
    profile = _REGISTRY.get(cipher)
    if profile is None and cipher in _LAZY_MODULES:
        try:
            importlib.import_module(_LAZY_MODULES[cipher])
        except ImportError:
            return None
        profile = _REGISTRY.get(cipher)
    return profile


def supported_ciphers() -> frozenset[str]:
    """Ciphers this build can seal and open (the local half of the write set).

    A lazy profile not yet imported counts when its module and the
    libraries it needs can be found, without importing them: a plaintext
    ``push`` with nothing to seal asks this on every run and must not pay
    for the age stack (issue #17, start-up). A profile whose import then
    fails is refused by :func:`seal` with a clear error, as before."""
    return frozenset(name for name in ("none", *_LAZY_MODULES) if _available(name))


def _available(cipher: str) -> bool:
    if cipher in _REGISTRY:
        return True
    module = _LAZY_MODULES.get(cipher)
    if module is None:
        return False
    required = (module, *_LAZY_REQUIRES.get(cipher, ()))
    try:
        return all(importlib.util.find_spec(name) is not None for name in required)
    except (ImportError, ValueError):
        return False


def seal(message: Message, cipher: str, params: SealParams | None = None) -> Envelope:
    """Seal with the named profile; raises :class:`ProfileError` if it cannot."""
    profile = get_profile(cipher)
    if profile is None:
        raise ProfileError("cipher", f"no implementation of cipher profile {cipher!r}")
    return profile.seal(message, params or SealParams())


def open_envelope(envelope: Envelope, ctx: OpenContext | None = None) -> OpenOutcome:
    """Open one envelope into its closed outcome; never raises on bad input."""
    ctx = ctx or OpenContext()
    if envelope.v != ENVELOPE_VERSION:
        return Blocked(BlockState.UNSUPPORTED_CIPHER, f"envelope version {envelope.v} unsupported")
    if ctx.allowed_ciphers is not None and envelope.cipher not in ctx.allowed_ciphers:
        return Blocked(
            BlockState.POLICY_VIOLATION,
            f"cipher {envelope.cipher!r} is not allowed by the policy effective at this sequence",
        )
    profile = get_profile(envelope.cipher)
    if profile is None:
        return Blocked(BlockState.UNSUPPORTED_CIPHER, f"cipher {envelope.cipher!r} unsupported")
    return profile.open(envelope, ctx)


# The plaintext profile is always present.
register_profile(_none_profile.PROFILE)
