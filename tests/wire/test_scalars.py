"""Canonical protocol scalars (wire/scalars.py; v1.md "Scope and conventions")."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.wire.wire_strategies import PROPERTY, agent_names, spell_timestamp, utc_datetimes
from wire import scalars
from wire.errors import ScalarError
from wire.limits import MAX_KEY_ID_BYTES, MAX_NAME_SCALARS, MAX_SEQ

# --- sequences --------------------------------------------------------------


@pytest.mark.parametrize("text", ["0", "1", "42", "1000", str(MAX_SEQ)])
def test_sequence_accepts_canonical_decimal(text: str) -> None:
    assert scalars.parse_seq(text, "after") == int(text)


@pytest.mark.parametrize("text", ["00", "01", "007", "0" * 19 + "1"])
def test_sequence_rejects_leading_zero(text: str) -> None:
    with pytest.raises(ScalarError):
        scalars.parse_seq(text, "after")


@pytest.mark.parametrize("text", ["+1", "-1", "-0", "+0"])
def test_sequence_rejects_sign(text: str) -> None:
    with pytest.raises(ScalarError):
        scalars.parse_seq(text, "after")


@pytest.mark.parametrize("text", [" 1", "1 ", "1\n", "\t1", "1 0"])
def test_sequence_rejects_whitespace(text: str) -> None:
    with pytest.raises(ScalarError):
        scalars.parse_seq(text, "after")


@pytest.mark.parametrize("text", ["\u0661", "\uff11", "1\u0662", "\u00b9"])
def test_sequence_rejects_non_ascii_digits(text: str) -> None:
    with pytest.raises(ScalarError):
        scalars.parse_seq(text, "after")


@pytest.mark.parametrize("text", ["", "1e3", "0x1", "1_000", "1.0", "one", "1,000"])
def test_sequence_rejects_non_decimal_spellings(text: str) -> None:
    with pytest.raises(ScalarError):
        scalars.parse_seq(text, "after")


@pytest.mark.parametrize(
    "text", [str(MAX_SEQ + 1), str(2**64 - 1), "9" * 19, "1" + "0" * 19, "1" * 5000]
)
def test_sequence_rejects_values_beyond_signed_64_bit(text: str) -> None:
    with pytest.raises(ScalarError, match="64-bit"):
        scalars.parse_seq(text, "after")


@pytest.mark.parametrize("value", [1, 0, None, 1.0, True, b"1", ["1"]])
def test_sequence_rejects_non_string(value: object) -> None:
    with pytest.raises(ScalarError):
        scalars.parse_seq(value, "after")


def test_sequence_error_names_the_field() -> None:
    with pytest.raises(ScalarError) as caught:
        scalars.parse_seq("01", "messages[3].server_seq")
    assert caught.value.field == "messages[3].server_seq"


@pytest.mark.parametrize("value", [-1, MAX_SEQ + 1, True, 1.0, "1", None])
def test_format_seq_rejects_values_outside_signed_64_bit_range(value: Any) -> None:
    with pytest.raises(ScalarError):
        scalars.format_seq(value)


@PROPERTY
@given(st.integers(min_value=0, max_value=MAX_SEQ))
def test_sequence_format_and_parse_round_trip(value: int) -> None:
    text = scalars.format_seq(value)
    assert text == str(value)
    assert scalars.parse_seq(text, "seq") == value


@PROPERTY
@given(st.integers(min_value=MAX_SEQ + 1, max_value=2**80))
def test_sequence_above_maximum_is_always_rejected(value: int) -> None:
    with pytest.raises(ScalarError):
        scalars.parse_seq(str(value), "seq")


# --- UUIDs --------------------------------------------------------------------

UUID4_EXAMPLE = "550e8400-e29b-41d4-a716-446655440000"
UUID7_EXAMPLE = "018f3f7e-0000-7000-8000-000000000000"

NON_CANONICAL_UUID_SPELLINGS = [
    "550E8400-E29B-41D4-A716-446655440000",
    "{550e8400-e29b-41d4-a716-446655440000}",
    "urn:uuid:550e8400-e29b-41d4-a716-446655440000",
    "550e8400e29b41d4a716446655440000",
    "550e8400-e29b-41d4-a716-446655440000\n",
    " 550e8400-e29b-41d4-a716-446655440000",
    "550e8400-e29b-41d4-a716-44665544000",
    "550e8400-e29b-41d4-a716-4466554400000",
    "550e8400-e29b-41d4-a716_446655440000",
    "",
]


def test_uuid4_accepts_canonical_lowercase_v4() -> None:
    assert scalars.check_uuid4(UUID4_EXAMPLE, "id") == UUID4_EXAMPLE


@pytest.mark.parametrize("text", NON_CANONICAL_UUID_SPELLINGS)
def test_uuid4_rejects_non_canonical_spellings(text: str) -> None:
    with pytest.raises(ScalarError):
        scalars.check_uuid4(text, "id")


@pytest.mark.parametrize("version", ["1", "3", "5", "6", "7", "8", "0"])
def test_uuid4_rejects_other_versions(version: str) -> None:
    text = UUID4_EXAMPLE[:14] + version + UUID4_EXAMPLE[15:]
    with pytest.raises(ScalarError):
        scalars.check_uuid4(text, "id")


@pytest.mark.parametrize("variant", ["0", "7", "c", "f"])
def test_uuid4_rejects_non_rfc_variant(variant: str) -> None:
    text = UUID4_EXAMPLE[:19] + variant + UUID4_EXAMPLE[20:]
    with pytest.raises(ScalarError):
        scalars.check_uuid4(text, "id")


@pytest.mark.parametrize("value", [None, 1, uuid.UUID(UUID4_EXAMPLE), UUID4_EXAMPLE.encode()])
def test_uuid_checks_reject_non_string(value: object) -> None:
    with pytest.raises(ScalarError):
        scalars.check_uuid4(value, "id")
    with pytest.raises(ScalarError):
        scalars.check_uuid7(value, "team_id")


def test_uuid7_accepts_canonical_lowercase_v7() -> None:
    assert scalars.check_uuid7(UUID7_EXAMPLE, "team_id") == UUID7_EXAMPLE


@pytest.mark.parametrize(
    "text", [UUID4_EXAMPLE, UUID7_EXAMPLE.upper(), UUID7_EXAMPLE[:19] + "c" + UUID7_EXAMPLE[20:]]
)
def test_uuid7_rejects_other_versions_case_and_variant(text: str) -> None:
    with pytest.raises(ScalarError):
        scalars.check_uuid7(text, "team_id")


@PROPERTY
@given(st.integers(min_value=0, max_value=2**128 - 1))
def test_generated_uuid4_is_accepted_only_as_v4(number: int) -> None:
    text = str(uuid.UUID(int=number, version=4))
    assert scalars.check_uuid4(text, "id") == text
    with pytest.raises(ScalarError):
        scalars.check_uuid7(text, "id")


@PROPERTY
@given(st.integers(min_value=0, max_value=2**128 - 1))
def test_uppercase_hex_in_a_uuid_is_always_rejected(number: int) -> None:
    text = str(uuid.UUID(int=number, version=4)).upper()
    assume(text != text.lower())
    with pytest.raises(ScalarError):
        scalars.check_uuid4(text, "id")


@PROPERTY
@given(st.integers(min_value=0, max_value=2**128 - 1))
def test_generated_uuid7_is_accepted_only_as_v7(number: int) -> None:
    # Same version/variant bit layout as RFC 9562 UUIDv7.
    number = (number & ~(0xF << 76)) | (0x7 << 76)
    number = (number & ~(0x3 << 62)) | (0x2 << 62)
    text = str(uuid.UUID(int=number))
    assert scalars.check_uuid7(text, "team_id") == text
    with pytest.raises(ScalarError):
        scalars.check_uuid4(text, "team_id")


# --- timestamps -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "2026-07-20T06:30:00.000000Z",
        "2024-02-29T23:59:59.999999Z",
        "0001-01-01T00:00:00.000000Z",
        "9999-12-31T23:59:59.999999Z",
    ],
)
def test_timestamp_accepts_canonical_utc_form(text: str) -> None:
    assert scalars.check_timestamp(text, "created_at") == text


@pytest.mark.parametrize(
    "text",
    [
        "2026-07-20T06:30:00Z",
        "2026-07-20T06:30:00.000Z",
        "2026-07-20T06:30:00.000000000Z",
        "2026-07-20T06:30:00.000000+00:00",
        "2026-07-20T06:30:00.000000",
        "2026-07-20T06:30:00.000000z",
        "2026-07-20t06:30:00.000000Z",
        "2026-07-20 06:30:00.000000Z",
        "20260720T063000.000000Z",
        "2026-7-20T06:30:00.000000Z",
        "+2026-07-20T06:30:00.000000Z",
        "2026-07-20T06:30:00,000000Z",
        "2026-07-20T06:30:00.000000Z\n",
        "2026-07-20T06:30:0\u0661.000000Z",
        "",
    ],
)
def test_timestamp_rejects_non_canonical_spellings(text: str) -> None:
    with pytest.raises(ScalarError):
        scalars.check_timestamp(text, "created_at")


@pytest.mark.parametrize(
    "text",
    [
        "2026-07-20T23:59:60.000000Z",
        "2026-02-29T00:00:00.000000Z",
        "2026-13-01T00:00:00.000000Z",
        "2026-00-10T00:00:00.000000Z",
        "2026-04-31T00:00:00.000000Z",
        "2026-07-00T00:00:00.000000Z",
        "2026-07-20T24:00:00.000000Z",
        "2026-07-20T06:60:00.000000Z",
        "0000-01-01T00:00:00.000000Z",
    ],
)
def test_timestamp_rejects_impossible_instants_and_leap_seconds(text: str) -> None:
    with pytest.raises(ScalarError, match="real calendar instant"):
        scalars.check_timestamp(text, "created_at")


@pytest.mark.parametrize("value", [None, 0, 1.5, b"2026-07-20T06:30:00.000000Z"])
def test_timestamp_rejects_non_string(value: object) -> None:
    with pytest.raises(ScalarError):
        scalars.check_timestamp(value, "created_at")


def test_parse_timestamp_returns_aware_utc_datetime() -> None:
    moment = scalars.parse_timestamp("2026-07-20T06:30:00.000001Z", "t")
    assert moment == datetime(2026, 7, 20, 6, 30, 0, 1, tzinfo=UTC)
    assert moment.utcoffset() == timedelta(0)


def test_format_timestamp_rejects_naive_datetime() -> None:
    with pytest.raises(ScalarError):
        scalars.format_timestamp(datetime(2026, 7, 20, 6, 30))


def test_format_timestamp_converts_offsets_to_utc() -> None:
    tokyo = timezone(timedelta(hours=9))
    moment = datetime(2026, 7, 20, 15, 30, tzinfo=tokyo)
    assert scalars.format_timestamp(moment) == "2026-07-20T06:30:00.000000Z"


def test_format_timestamp_always_writes_six_fraction_digits() -> None:
    moment = datetime(2026, 7, 20, 6, 30, 0, 1200, tzinfo=UTC)
    assert scalars.format_timestamp(moment) == "2026-07-20T06:30:00.001200Z"


def test_format_timestamp_zero_pads_years_below_1000() -> None:
    moment = datetime(987, 6, 5, 4, 3, 2, 1, tzinfo=UTC)
    assert scalars.format_timestamp(moment) == "0987-06-05T04:03:02.000001Z"


@PROPERTY
@given(utc_datetimes)
def test_timestamp_format_and_parse_round_trip(moment: datetime) -> None:
    text = scalars.format_timestamp(moment)
    assert text == spell_timestamp(moment)
    assert scalars.check_timestamp(text, "t") == text
    assert scalars.parse_timestamp(text, "t") == moment


# --- agent and team names ---------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "leader",
        "worker-1",
        "a-",
        "Émile",
        "エージェント",
        "\U0001f916 bot",
        "x" * MAX_NAME_SCALARS,
        "\U0001f600" * MAX_NAME_SCALARS,
        "under_score",
        "\x80c1",
    ],
)
def test_agent_name_accepts_valid_names(text: str) -> None:
    assert scalars.check_agent_name(text, "from_agent") == text


def test_agent_name_limit_counts_scalar_values_not_bytes_or_utf16_units() -> None:
    with pytest.raises(ScalarError):
        scalars.check_agent_name("\U0001f600" * (MAX_NAME_SCALARS + 1), "from_agent")


@pytest.mark.parametrize("text", ["", "x" * (MAX_NAME_SCALARS + 1)])
def test_agent_name_rejects_length_outside_1_to_128(text: str) -> None:
    with pytest.raises(ScalarError):
        scalars.check_agent_name(text, "from_agent")


@pytest.mark.parametrize("text", ["-worker", "-", "--x"])
def test_agent_name_rejects_leading_dash(text: str) -> None:
    with pytest.raises(ScalarError, match="'-'"):
        scalars.check_agent_name(text, "from_agent")


@pytest.mark.parametrize("text", [".", ".."])
def test_agent_name_rejects_dot_and_dot_dot(text: str) -> None:
    with pytest.raises(ScalarError):
        scalars.check_agent_name(text, "from_agent")


@pytest.mark.parametrize("char", [".", "/", "\\", '"', "[", "]"])
def test_agent_name_rejects_path_and_quote_characters(char: str) -> None:
    with pytest.raises(ScalarError):
        scalars.check_agent_name(f"a{char}b", "from_agent")


@pytest.mark.parametrize("char", ["\x00", "\t", "\n", "\x1f", "\x7f"])
def test_agent_name_rejects_c0_controls_and_del(char: str) -> None:
    with pytest.raises(ScalarError, match="control"):
        scalars.check_agent_name(f"a{char}b", "from_agent")


@pytest.mark.parametrize("text", ["a\ud800", "\udfff"])
def test_agent_name_rejects_lone_surrogates(text: str) -> None:
    with pytest.raises(ScalarError):
        scalars.check_agent_name(text, "from_agent")


@pytest.mark.parametrize("text", ["e\u0301", "\u212b", "A\u030a"])
def test_agent_name_rejects_non_nfc_text(text: str) -> None:
    with pytest.raises(ScalarError, match="NFC"):
        scalars.check_agent_name(text, "from_agent")


@pytest.mark.parametrize("value", [None, 1, b"leader", ["leader"]])
def test_agent_name_rejects_non_string(value: object) -> None:
    with pytest.raises(ScalarError):
        scalars.check_agent_name(value, "from_agent")


def test_normalize_agent_name_applies_nfc_before_the_rules() -> None:
    assert scalars.normalize_agent_name("E\u0301mile", "name") == "\u00c9mile"


def test_normalize_agent_name_still_enforces_every_rule() -> None:
    with pytest.raises(ScalarError):
        scalars.normalize_agent_name("-e\u0301", "name")


@PROPERTY
@given(agent_names)
def test_generated_agent_names_are_accepted(text: str) -> None:
    assert scalars.check_agent_name(text, "to_agent") == text


@PROPERTY
@given(agent_names, st.sampled_from(list('./\\"[]\x00\x1f\x7f')), st.data())
def test_any_forbidden_character_anywhere_is_rejected(
    text: str, char: str, data: st.DataObject
) -> None:
    at = data.draw(st.integers(min_value=0, max_value=len(text)))
    with pytest.raises(ScalarError):
        scalars.check_agent_name(text[:at] + char + text[at:], "to_agent")


@pytest.mark.parametrize("text", ["example-team", ".", "a/b [x]", '"quoted"', "-lead"])
def test_team_name_allows_characters_agent_names_forbid(text: str) -> None:
    assert scalars.check_team_name(text, "team_name") == text


@pytest.mark.parametrize(
    "text", ["", "x" * (MAX_NAME_SCALARS + 1), "a\x00", "a\x7f", "e\u0301", "\ud800"]
)
def test_team_name_rejects_size_controls_and_non_nfc(text: str) -> None:
    with pytest.raises(ScalarError):
        scalars.check_team_name(text, "team_name")


# --- cipher and key identifiers -----------------------------------------------


@pytest.mark.parametrize("text", ["none", "age-v1", "a", "0", "x.y_z-1", "a" * 64])
def test_cipher_accepts_lowercase_scheme_identifiers(text: str) -> None:
    assert scalars.check_cipher(text, "cipher") == text


@pytest.mark.parametrize(
    "text", ["", "a" * 65, "None", "AGE", ".x", "-x", "_x", "a b", "ä", "a/b", "a\n", "a+b"]
)
def test_cipher_rejects_identifiers_outside_the_grammar(text: str) -> None:
    with pytest.raises(ScalarError):
        scalars.check_cipher(text, "cipher")


@pytest.mark.parametrize("value", [None, 1, b"none"])
def test_cipher_rejects_non_string(value: object) -> None:
    with pytest.raises(ScalarError):
        scalars.check_cipher(value, "cipher")


def test_key_id_accepts_null() -> None:
    assert scalars.check_key_id(None, "key_id") is None


@pytest.mark.parametrize(
    "text",
    [
        "epoch-1",
        "Mixed Case / with spaces",
        "k" * MAX_KEY_ID_BYTES,
        "é" * (MAX_KEY_ID_BYTES // 2),
        "\U0001f511" * (MAX_KEY_ID_BYTES // 4),
    ],
)
def test_key_id_accepts_nfc_text_of_1_to_256_utf8_bytes(text: str) -> None:
    assert scalars.check_key_id(text, "key_id") == text


@pytest.mark.parametrize(
    "text",
    ["", "k" * (MAX_KEY_ID_BYTES + 1), "é" * (MAX_KEY_ID_BYTES // 2) + "k", "\U0001f511" * 65],
)
def test_key_id_limit_counts_utf8_bytes(text: str) -> None:
    with pytest.raises(ScalarError, match="UTF-8 bytes"):
        scalars.check_key_id(text, "key_id")


@pytest.mark.parametrize("char", ["\x00", "\n", "\x1f", "\x7f"])
def test_key_id_rejects_c0_controls_and_del(char: str) -> None:
    with pytest.raises(ScalarError, match="control"):
        scalars.check_key_id(f"k{char}", "key_id")


def test_key_id_rejects_non_nfc_text() -> None:
    with pytest.raises(ScalarError, match="NFC"):
        scalars.check_key_id("e\u0301", "key_id")


def test_key_id_rejects_lone_surrogates() -> None:
    with pytest.raises(ScalarError, match="surrogate"):
        scalars.check_key_id("k\ud800", "key_id")


@pytest.mark.parametrize("value", [0, 1, True, False, ["k"], {"k": 1}, b"k"])
def test_key_id_rejects_non_string_non_null(value: object) -> None:
    with pytest.raises(ScalarError):
        scalars.check_key_id(value, "key_id")


@pytest.mark.parametrize("text", ["epoch-1", "0", "e.1_x", "e" * 64])
def test_profile_key_id_accepts_epoch_names(text: str) -> None:
    assert scalars.check_profile_key_id(text, "key_id") == text


@pytest.mark.parametrize("value", [None, "", "Epoch", "e" * 65, "-e", "e 1", "é"])
def test_profile_key_id_rejects_anything_outside_the_epoch_grammar(value: object) -> None:
    with pytest.raises(ScalarError):
        scalars.check_profile_key_id(value, "key_id")


def test_format_timestamp_refuses_an_instant_before_year_one_in_utc() -> None:
    from datetime import datetime, timedelta, timezone

    import pytest

    from wire.errors import ScalarError
    from wire.scalars import format_timestamp

    plus_nine = timezone(timedelta(hours=9))
    with pytest.raises(ScalarError):
        format_timestamp(datetime(1, 1, 1, 0, 0, tzinfo=plus_nine))


def test_agent_name_refused_again_on_every_repeat_not_remembered_as_valid() -> None:
    for _ in range(3):
        with pytest.raises(ScalarError, match="'-'"):
            scalars.check_agent_name("-again", "from_agent")


def test_agent_name_in_a_str_subclass_gets_the_same_rules_and_an_exact_str_back() -> None:
    class Name(str):
        pass

    assert type(scalars.check_agent_name(Name("leader"), "from_agent")) is str
    with pytest.raises(ScalarError, match="'-'"):
        scalars.check_agent_name(Name("-leader"), "from_agent")


def test_agent_name_error_names_the_field_of_each_call() -> None:
    for field in ("message.from_agent", "message.to_agent"):
        with pytest.raises(ScalarError) as caught:
            scalars.check_agent_name("a/b", field)
        assert caught.value.field == field
