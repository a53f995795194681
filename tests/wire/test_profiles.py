"""Cipher-profile dispatch and the closed open outcome (wire/profiles.py,
wire/outcome.py)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import pytest

from wire import profiles
from wire.envelope import Envelope
from wire.errors import ProfileError
from wire.message import Message
from wire.outcome import Blocked, BlockState, Importable, OpenOutcome
from wire.profiles import OpenContext, SealParams, open_envelope, seal

EXAMPLE = Message("Run the test suite", "2026-07-20T06:30:00.000000Z", "leader", "worker-1")


@dataclass
class SpyProfile:
    """A registered profile that records every call and opens to a fixed outcome."""

    name: str
    opened: list[Envelope] = field(default_factory=list)
    sealed: list[Message] = field(default_factory=list)

    def seal(self, message: Message, params: SealParams) -> Envelope:
        self.sealed.append(message)
        return Envelope.from_blob_bytes(self.name, "spy-epoch", b"sealed")

    def open(self, envelope: Envelope, ctx: OpenContext) -> OpenOutcome:
        self.opened.append(envelope)
        return Importable(EXAMPLE)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> SpyProfile:
    profile = SpyProfile("spy-v1")
    monkeypatch.setitem(profiles._REGISTRY, profile.name, profile)
    return profile


def _envelope(cipher: str = "none", v: int = 1) -> Envelope:
    key_id = None if cipher == "none" else "epoch-1"
    return Envelope.from_blob_bytes(cipher, key_id, EXAMPLE.to_jcs(), v=v)


def _state(outcome: OpenOutcome) -> BlockState:
    assert isinstance(outcome, Blocked)
    return outcome.state


# --- open dispatch order ------------------------------------------------------------


@pytest.mark.parametrize("v", [0, 2, 2**32 - 1])
def test_open_blocks_other_envelope_versions_as_unsupported(v: int) -> None:
    assert _state(open_envelope(_envelope(v=v))) is BlockState.UNSUPPORTED_CIPHER


def test_open_checks_version_before_policy() -> None:
    ctx = OpenContext(allowed_ciphers=frozenset({"age-v1"}))
    assert _state(open_envelope(_envelope(v=2), ctx)) is BlockState.UNSUPPORTED_CIPHER


def test_open_blocks_ciphers_outside_the_effective_policy() -> None:
    ctx = OpenContext(allowed_ciphers=frozenset({"age-v1"}))
    assert _state(open_envelope(_envelope("none"), ctx)) is BlockState.POLICY_VIOLATION


def test_open_with_empty_policy_blocks_every_cipher() -> None:
    ctx = OpenContext(allowed_ciphers=frozenset())
    assert _state(open_envelope(_envelope("none"), ctx)) is BlockState.POLICY_VIOLATION


def test_open_checks_policy_before_cipher_support() -> None:
    ctx = OpenContext(allowed_ciphers=frozenset({"none"}))
    assert _state(open_envelope(_envelope("future-v9"), ctx)) is BlockState.POLICY_VIOLATION


def test_open_never_reaches_the_profile_on_policy_violation(spy: SpyProfile) -> None:
    ctx = OpenContext(allowed_ciphers=frozenset({"none"}))
    open_envelope(_envelope(spy.name), ctx)
    assert spy.opened == []


def test_open_never_reaches_the_profile_for_other_versions(spy: SpyProfile) -> None:
    open_envelope(_envelope(spy.name, v=2))
    assert spy.opened == []


def test_open_blocks_unknown_ciphers_as_unsupported() -> None:
    assert _state(open_envelope(_envelope("future-v9"))) is BlockState.UNSUPPORTED_CIPHER


def test_open_without_policy_skips_the_policy_check() -> None:
    assert open_envelope(_envelope("none"), OpenContext(allowed_ciphers=None)) == Importable(
        EXAMPLE
    )


def test_open_defaults_to_an_empty_context() -> None:
    assert open_envelope(_envelope("none")) == Importable(EXAMPLE)


def test_open_delegates_allowed_supported_ciphers_to_their_profile(spy: SpyProfile) -> None:
    envelope = _envelope(spy.name)
    ctx = OpenContext(allowed_ciphers=frozenset({spy.name}))
    assert open_envelope(envelope, ctx) == Importable(EXAMPLE)
    assert spy.opened == [envelope]


def test_blocked_outcome_carries_no_message_projection() -> None:
    envelope = _envelope("future-v9")
    outcome = open_envelope(envelope)
    assert isinstance(outcome, Blocked)
    assert not hasattr(outcome, "message")


# --- seal dispatch ------------------------------------------------------------------


def test_seal_refuses_ciphers_without_an_implementation() -> None:
    with pytest.raises(ProfileError, match="no implementation"):
        seal(EXAMPLE, "future-v9")


def test_seal_with_default_params_uses_the_none_rules() -> None:
    envelope = seal(EXAMPLE, "none")
    assert (envelope.v, envelope.cipher, envelope.key_id) == (1, "none", None)
    assert envelope.blob_bytes() == EXAMPLE.to_jcs()


def test_seal_passes_params_to_the_profile() -> None:
    with pytest.raises(ProfileError):
        seal(EXAMPLE, "none", SealParams(key_id="epoch-1"))


def test_seal_delegates_to_the_registered_profile(spy: SpyProfile) -> None:
    assert seal(EXAMPLE, spy.name).cipher == spy.name
    assert spy.sealed == [EXAMPLE]


# --- registry -----------------------------------------------------------------------


def test_none_profile_is_always_registered() -> None:
    profile = profiles.get_profile("none")
    assert profile is not None
    assert profile.name == "none"


def test_get_profile_returns_none_for_unknown_ciphers() -> None:
    assert profiles.get_profile("future-v9") is None


def test_lazy_profile_whose_module_cannot_import_is_unsupported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(profiles._LAZY_MODULES, "ghost-v1", "wire._no_such_profile_module")
    assert profiles.get_profile("ghost-v1") is None
    assert _state(open_envelope(_envelope("ghost-v1"))) is BlockState.UNSUPPORTED_CIPHER


def test_registered_profile_becomes_available(spy: SpyProfile) -> None:
    assert profiles.get_profile(spy.name) is spy


def test_supported_ciphers_include_none() -> None:
    assert "none" in profiles.supported_ciphers()


def test_supported_ciphers_exclude_lazy_profiles_that_cannot_import(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(profiles._LAZY_MODULES, "ghost-v1", "wire._no_such_profile_module")
    assert "ghost-v1" not in profiles.supported_ciphers()


# --- outcome vocabulary ---------------------------------------------------------------


def test_block_states_are_the_spec_quarantine_vocabulary() -> None:
    """The spec's five, then our two (issues #33, #34; specs/wire.md §5)."""
    assert {state.value for state in BlockState} == {
        "unsupported_cipher",
        "pending_key",
        "authentication_failed",
        "malformed",
        "policy_violation",
        "manifest_mismatch",
        "before_join",
    }


def test_importable_reports_the_importable_state() -> None:
    assert Importable(EXAMPLE).state == "importable"


def test_supported_ciphers_finds_a_lazy_profile_without_importing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A plaintext push asks on every run; finding age-v1 must not import it.
    monkeypatch.delitem(profiles._REGISTRY, "age-v1", raising=False)
    monkeypatch.delitem(sys.modules, "wire.age_profile", raising=False)
    assert "age-v1" in profiles.supported_ciphers()
    assert "wire.age_profile" not in sys.modules


def test_supported_ciphers_exclude_lazy_profiles_whose_library_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(profiles._REGISTRY, "age-v1", raising=False)
    monkeypatch.setitem(profiles._LAZY_REQUIRES, "age-v1", ("_no_such_crypto_library",))
    assert "age-v1" not in profiles.supported_ciphers()
