"""age X25519 keys and the profile's identity-file rules (age-v1-profile.md,
"Key bootstrap and operational limits")."""

from __future__ import annotations

import pytest

from wire.age_keys import AgeKeyError, X25519Identity, X25519Recipient, parse_identity_file
from wire.bech32 import Bech32Error

# PUBLIC TEST KEY from the shared age-v1 vectors (team_a); never use outside tests.
TEST_IDENTITY = "AGE-SECRET-KEY-1WWJJYKYVUUQNL8ZX7Y6NYRTEW79LHTF0H28EYC0CFYN5A7WECDHQMT4S0V"
TEST_RECIPIENT = "age1mmqjrejftea4f6xh47lhpc0jn4vw0yuhz349sw2e3sfl22k5gcjsv6xcvp"


def test_identity_derives_the_published_recipient() -> None:
    identity = X25519Identity.from_string(TEST_IDENTITY)
    assert identity.recipient.to_string() == TEST_RECIPIENT


def test_identity_secret_string_round_trips() -> None:
    assert X25519Identity.from_string(TEST_IDENTITY).to_secret_string() == TEST_IDENTITY


def test_generated_identity_round_trips_through_its_secret_string() -> None:
    identity = X25519Identity.generate()
    again = X25519Identity.from_string(identity.to_secret_string())
    assert again.recipient == identity.recipient


def test_identity_repr_never_shows_the_secret() -> None:
    identity = X25519Identity.from_string(TEST_IDENTITY)
    assert TEST_IDENTITY not in repr(identity)
    assert TEST_IDENTITY[16:] not in repr(identity).upper()


def test_recipient_round_trips() -> None:
    assert X25519Recipient.from_string(TEST_RECIPIENT).to_string() == TEST_RECIPIENT


def test_uppercase_recipient_is_refused() -> None:
    with pytest.raises(AgeKeyError, match="lowercase"):
        X25519Recipient.from_string(TEST_RECIPIENT.upper())


def test_identity_string_as_recipient_is_refused() -> None:
    with pytest.raises((AgeKeyError, Bech32Error)):
        X25519Recipient.from_string(TEST_IDENTITY.lower())


def test_recipient_with_wrong_hrp_is_refused() -> None:
    from wire import bech32

    with pytest.raises(AgeKeyError, match="age1"):
        X25519Recipient.from_string(bech32.encode("agx", bytes(32)))


def test_recipient_of_wrong_length_is_refused() -> None:
    from wire import bech32

    with pytest.raises(AgeKeyError, match="32 bytes"):
        X25519Recipient.from_string(bech32.encode("age", bytes(31)))


def test_lowercase_identity_is_refused() -> None:
    with pytest.raises(AgeKeyError, match="AGE-SECRET-KEY-1"):
        X25519Identity.from_string(TEST_IDENTITY.lower())


def test_identity_with_bad_checksum_is_refused_without_echoing_it() -> None:
    broken = TEST_IDENTITY[:-1] + ("Q" if TEST_IDENTITY[-1] != "Q" else "P")
    with pytest.raises(Bech32Error) as caught:
        X25519Identity.from_string(broken)
    assert TEST_IDENTITY[16:40] not in str(caught.value)


# --- identity files ---------------------------------------------------------


def test_identity_file_with_comments_and_blank_lines_parses() -> None:
    data = f"# created: today\n# public key: {TEST_RECIPIENT}\n\n{TEST_IDENTITY}\n\n".encode()
    assert parse_identity_file(data).recipient.to_string() == TEST_RECIPIENT


def test_identity_file_without_final_newline_parses() -> None:
    assert parse_identity_file(TEST_IDENTITY.encode()).recipient.to_string() == TEST_RECIPIENT


def test_identity_file_with_two_identities_is_refused() -> None:
    other = X25519Identity.generate().to_secret_string()
    with pytest.raises(AgeKeyError, match="exactly one identity"):
        parse_identity_file(f"{TEST_IDENTITY}\n{other}\n".encode())


def test_identity_file_without_identity_is_refused() -> None:
    with pytest.raises(AgeKeyError, match="found none"):
        parse_identity_file(b"# nothing here\n\n")


@pytest.mark.parametrize("line", [f" {TEST_IDENTITY}", f"{TEST_IDENTITY} ", f"{TEST_IDENTITY}\r"])
def test_identity_line_with_surrounding_whitespace_is_refused(line: str) -> None:
    with pytest.raises(AgeKeyError, match="whitespace"):
        parse_identity_file(f"{line}\n".encode())


def test_plugin_identity_is_refused() -> None:
    with pytest.raises(AgeKeyError, match="plugin"):
        parse_identity_file(b"AGE-PLUGIN-YUBIKEY-1QQQQQQQQQQQQQQQQ\n")


def test_armored_or_encrypted_identity_file_is_refused() -> None:
    with pytest.raises(AgeKeyError, match="only blank lines"):
        parse_identity_file(b"age-encryption.org/v1\n-> scrypt abc 18\n")


def test_non_ascii_identity_file_is_refused() -> None:
    with pytest.raises(AgeKeyError, match="ASCII"):
        parse_identity_file("# clé\n".encode() + TEST_IDENTITY.encode())


def test_identity_file_error_never_contains_the_secret() -> None:
    other = X25519Identity.generate().to_secret_string()
    for data in (
        f"{TEST_IDENTITY}\n{other}\n",
        f" {TEST_IDENTITY}\n",
        f"{TEST_IDENTITY.lower()}\n",
        f"{TEST_IDENTITY[:-1]}X\n",
    ):
        with pytest.raises((AgeKeyError, Bech32Error)) as caught:
            parse_identity_file(data.encode())
        message = str(caught.value)
        assert TEST_IDENTITY[16:] not in message.upper()
        assert other[16:] not in message.upper()
