"""RFC 8785 canonical encoding and the strict I-JSON decoder (wire/jcs.py)."""

from __future__ import annotations

import decimal
import json
import math
import random
import re
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.wire.wire_strategies import PROPERTY, json_values
from wire import jcs
from wire.errors import CanonicalJsonError
from wire.limits import MAX_JSON_DEPTH, MAX_SAFE_INTEGER

V1_EXAMPLE_MESSAGE_JCS = (
    b'{"body":"Run the test suite","created_at":"2026-07-20T06:30:00.000000Z",'
    b'"from_agent":"leader","to_agent":"worker-1"}'
)


def _double(bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(bits))[0]
    return value


def _nested_lists(levels: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


# --- encoder: numbers (RFC 8785 §3.2.2.3) -----------------------------------

# IEEE-754 bit patterns and their ECMAScript Number.prototype.toString form.
RFC8785_NUMBER_TABLE = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "expected"), RFC8785_NUMBER_TABLE)
def test_numbers_serialize_as_ecmascript_tostring(bits: str, expected: str) -> None:
    assert jcs.format_number(_double(bits)) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (-0.0, "0"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (0.1, "0.1"),
        (-1.5, "-1.5"),
        (1.0, "1"),
        (4.50, "4.5"),
        (2e-3, "0.002"),
        (1e30, "1e+30"),
        (1e-27, "1e-27"),
        (1.5e-5, "0.000015"),
        (123456789.0, "123456789"),
        (9007199254740991, "9007199254740991"),
        (-9007199254740991, "-9007199254740991"),
    ],
)
def test_number_formatting_examples(value: float, expected: str) -> None:
    assert jcs.format_number(value) == expected


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_encoder_rejects_non_finite_numbers(value: float) -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.canonicalize([value])


@pytest.mark.parametrize("value", [MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 2**63])
def test_encoder_rejects_integers_beyond_safe_range(value: int) -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.canonicalize(value)


def test_format_number_rejects_booleans() -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.format_number(True)


def _reference_es_number(value: float) -> str:
    """ECMAScript Number::toString, by exact decimal search for the shortest digits."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    with decimal.localcontext() as ctx:
        ctx.prec = 1200
        exact = decimal.Decimal(magnitude)
        for k in range(1, 18):
            unit = decimal.Decimal(1).scaleb(exact.adjusted() - k + 1)
            below = (exact / unit).to_integral_value(decimal.ROUND_FLOOR)
            fits = [s for s in (below, below + 1) if float(s * unit) == magnitude]
            if fits:
                best = min(fits, key=lambda s: (abs(s * unit - exact), s % 2))
                break
        scaled = best * unit
    digits = str(int(scaled.scaleb(-scaled.adjusted() + 20))).rstrip("0")
    k, n = len(digits), scaled.adjusted() + 1
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    tail = "." + digits[1:] if k > 1 else ""
    return f"{sign}{digits[0]}{tail}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"


_ES_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?(e[+-][1-9][0-9]*)?")

finite_floats = st.floats(allow_nan=False, allow_infinity=False)


@PROPERTY
@given(finite_floats)
def test_number_text_round_trips_to_the_same_double(value: float) -> None:
    assert float(jcs.format_number(value)) == value


@PROPERTY
@given(finite_floats)
def test_number_text_matches_reference_ecmascript_algorithm(value: float) -> None:
    text = jcs.format_number(value)
    assert _ES_NUMBER.fullmatch(text)
    assert text == _reference_es_number(value)


@PROPERTY
@given(finite_floats.filter(lambda value: value != 0))
def test_exponent_form_is_used_only_outside_1e_minus_6_to_1e21(value: float) -> None:
    uses_exponent = "e" in jcs.format_number(value)
    assert uses_exponent == (abs(value) >= 1e21 or abs(value) < 1e-6)


# --- encoder: strings (RFC 8785 §3.2.2.2) -----------------------------------


@pytest.mark.parametrize(
    ("char", "escaped"),
    [
        ('"', '\\"'),
        ("\\", "\\\\"),
        ("\b", "\\b"),
        ("\t", "\\t"),
        ("\n", "\\n"),
        ("\f", "\\f"),
        ("\r", "\\r"),
        ("\x00", "\\u0000"),
        ("\x0b", "\\u000b"),
        ("\x0f", "\\u000f"),
        ("\x1f", "\\u001f"),
    ],
)
def test_strings_use_short_escapes_or_lowercase_u00xx(char: str, escaped: str) -> None:
    assert jcs.canonicalize(char) == ('"' + escaped + '"').encode("ascii")


@pytest.mark.parametrize("char", ["/", "\x7f", "\x80", "é", "\u2028", "\u20ac", "\U0001f600", "'"])
def test_strings_leave_everything_else_literal_utf8(char: str) -> None:
    assert jcs.canonicalize(char) == ('"' + char + '"').encode("utf-8")


@pytest.mark.parametrize("value", ["\ud800", "a\udfffb", {"\udc00": 1}, ["\ud83d"]])
def test_encoder_rejects_lone_surrogates(value: Any) -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.canonicalize(value)


def test_rfc8785_example_canonicalizes_to_published_bytes() -> None:
    source = (
        '{\n  "numbers": [333333333.33333329, 1E30, 4.50,\n'
        "              2e-3, 0.000000000000000000000000001],\n"
        '  "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n'
        '  "literals": [null, true, false]\n}'
    )
    expected = (
        '{"literals":[null,true,false],'
        '"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    ).encode()
    assert jcs.canonicalize(jcs.loads(source)) == expected


# --- encoder: structure (RFC 8785 §3.2.3) -----------------------------------


def test_members_sort_by_utf16_code_units() -> None:
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    expected = (
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control",'
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",'
        '"\U0001f600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
    ).encode("utf-8")
    assert jcs.canonicalize(value) == expected


def test_astral_member_sorts_before_high_bmp_member_unlike_code_point_order() -> None:
    # U+1F600 is D83D DE00 in UTF-16, which precedes U+FB33.
    assert jcs.canonicalize({"\ufb33": 0, "\U0001f600": 1}) == (
        '{"\U0001f600":1,"\ufb33":0}'.encode()
    )


def test_members_are_sorted_at_every_depth() -> None:
    value = {"b": [{"z": 1, "a": {"y": 2, "x": 3}}], "a": None}
    assert jcs.canonicalize(value) == b'{"a":null,"b":[{"a":{"x":3,"y":2},"z":1}]}'


def test_array_order_is_preserved() -> None:
    assert jcs.canonicalize([3, 1, 2]) == b"[3,1,2]"


def test_output_has_no_insignificant_whitespace() -> None:
    assert jcs.canonicalize({"a": [1, {"b": True}], "c": False}) == (
        b'{"a":[1,{"b":true}],"c":false}'
    )


def test_tuples_encode_as_arrays() -> None:
    assert jcs.canonicalize((1, "x", None)) == b'[1,"x",null]'


def test_v1_example_message_canonicalizes_to_literal_bytes() -> None:
    value = {
        "to_agent": "worker-1",
        "from_agent": "leader",
        "created_at": "2026-07-20T06:30:00.000000Z",
        "body": "Run the test suite",
    }
    assert jcs.canonicalize(value) == V1_EXAMPLE_MESSAGE_JCS


def test_encoder_rejects_non_string_member_names() -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.canonicalize({1: "x"})


@pytest.mark.parametrize("value", [b"bytes", {1, 2}, object(), 1j])
def test_encoder_rejects_values_without_json_form(value: Any) -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.canonicalize({"a": value})


def test_encoder_accepts_values_enclosed_by_max_depth_containers() -> None:
    value = _nested_lists(MAX_JSON_DEPTH, 0)
    assert jcs.canonicalize(value) == b"[" * MAX_JSON_DEPTH + b"0" + b"]" * MAX_JSON_DEPTH


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH + 1, 10_000])
def test_encoder_rejects_nesting_beyond_max_depth(levels: int) -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.canonicalize(_nested_lists(levels, 0))


# --- decoder ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1,"a":1}',
        '{"a":{"b":1,"b":2}}',
        '[0,[{"c":true,"d":1,"c":false}]]',
        '{"x":[{"y":{"z":{"k":1,"k":1}}}]}',
        '{"\\u0061":1,"a":2}',
    ],
)
def test_decoder_rejects_duplicate_keys_at_every_depth(text: str) -> None:
    with pytest.raises(CanonicalJsonError, match="duplicate"):
        jcs.loads(text)


def test_duplicate_key_error_names_the_member() -> None:
    with pytest.raises(CanonicalJsonError) as caught:
        jcs.loads('{"outer":{"inner":1,"inner":2}}')
    assert caught.value.field == "inner"


@pytest.mark.parametrize(
    "text",
    ['"\\ud800"', '"\\udc00"', '"a\\ud83d"', '"\\ude00\\ud83d"', '{"\\udbff":0}', '["\ud800"]'],
)
def test_decoder_rejects_lone_surrogates(text: str) -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.loads(text)


def test_decoder_joins_escaped_surrogate_pairs() -> None:
    assert jcs.loads('"\\ud83d\\ude00"') == "\U0001f600"


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "[NaN]", '{"a":Infinity}'])
def test_decoder_rejects_nan_and_infinity(text: str) -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.loads(text)


@pytest.mark.parametrize("text", ["1e400", "-1e400", "1" + "0" * 400 + ".0"])
def test_decoder_rejects_numbers_overflowing_double(text: str) -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.loads(text)


@pytest.mark.parametrize(
    "text",
    ["9007199254740993", "-9007199254740993", "12345678901234567890", "1" * 30, "9" * 5000],
)
def test_decoder_rejects_integers_a_javascript_peer_would_round(text: str) -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.loads(text)


@pytest.mark.parametrize("value", [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, 0])
def test_decoder_accepts_integers_within_safe_range(value: int) -> None:
    decoded = jcs.loads(str(value))
    assert decoded == value
    assert isinstance(decoded, int)


@pytest.mark.parametrize(
    "text", ["9007199254740992", "100000000000000000000", "-295147905179352830000"]
)
def test_decoder_accepts_canonical_spelling_of_large_integral_doubles(text: str) -> None:
    assert jcs.loads(text) == float(text)


@pytest.mark.parametrize("data", [b'"\xff"', b'"\xc0\xaf"', b'"\xed\xa0\x80"', b"[\x80]"])
def test_decoder_rejects_invalid_utf8(data: bytes) -> None:
    with pytest.raises(CanonicalJsonError, match="UTF-8"):
        jcs.loads(data)


def test_decoder_rejects_byte_order_mark() -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.loads(b"\xef\xbb\xbf{}")


@pytest.mark.parametrize("text", ["{} {}", "1 2", "{}x", "[]]", '"a""b"', "null\x00"])
def test_decoder_rejects_data_after_the_value(text: str) -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.loads(text)


def test_decoder_allows_json_whitespace_around_the_value() -> None:
    assert jcs.loads(' \t\r\n{ "a" :\n[ 1 ] }\r\n\t ') == {"a": [1]}


@pytest.mark.parametrize("text", ["\x0c{}", "{}\x0b", "\u00a0[]", "[]\u2028"])
def test_decoder_rejects_non_json_whitespace(text: str) -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.loads(text)


@pytest.mark.parametrize("text", ['"a\nb"', '"\x00"', '"\x1f"', '{"k\t":1}'])
def test_decoder_rejects_raw_control_characters_in_strings(text: str) -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.loads(text)


@pytest.mark.parametrize(
    "text", ["", " ", "01", "+1", ".5", "1.", "0x10", "1e", "'a'", "[1,]", "{'a':1}", "tru"]
)
def test_decoder_rejects_invalid_json_grammar(text: str) -> None:
    with pytest.raises(CanonicalJsonError):
        jcs.loads(text)


@pytest.mark.parametrize("convert", [bytes, bytearray, memoryview, lambda data: data.decode()])
def test_decoder_accepts_every_buffer_type_and_str(convert: Any) -> None:
    assert jcs.loads(convert(b'{"k":["\xc3\xa9"]}')) == {"k": ["é"]}


def test_decoder_accepts_values_enclosed_by_max_depth_containers() -> None:
    text = "[" * MAX_JSON_DEPTH + '"x"' + "]" * MAX_JSON_DEPTH
    assert jcs.loads(text) == _nested_lists(MAX_JSON_DEPTH, "x")


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH + 1, 5_000, 200_000])
def test_decoder_rejects_nesting_beyond_max_depth(levels: int) -> None:
    with pytest.raises(CanonicalJsonError, match="nesting"):
        jcs.loads("[" * levels + "0" + "]" * levels)


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1])
def test_encoder_and_decoder_agree_on_the_depth_limit(levels: int) -> None:
    value = _nested_lists(levels, {"k": [1]})
    try:
        encoded = jcs.canonicalize(value)
    except CanonicalJsonError:
        encoded = None
    text = json.dumps(value)
    try:
        decoded = jcs.loads(text)
    except CanonicalJsonError:
        decoded = None
    assert (encoded is None) == (decoded is None)


# --- properties -------------------------------------------------------------


def _shuffle_members(value: Any, rnd: random.Random) -> Any:
    if isinstance(value, dict):
        items = [(name, _shuffle_members(item, rnd)) for name, item in value.items()]
        rnd.shuffle(items)
        return dict(items)
    if isinstance(value, list):
        return [_shuffle_members(item, rnd) for item in value]
    return value


@PROPERTY
@given(json_values)
def test_canonical_bytes_decode_to_the_same_value(value: Any) -> None:
    assert jcs.loads(jcs.canonicalize(value)) == value


@PROPERTY
@given(json_values)
def test_canonical_bytes_parse_identically_with_the_stdlib_decoder(value: Any) -> None:
    # JSON numbers are doubles: only integers beyond ±2^53−1 need the hint.
    def as_number(text: str) -> int | float:
        return int(text) if len(text) <= 16 else float(text)

    assert json.loads(jcs.canonicalize(value), parse_int=as_number) == value


@PROPERTY
@given(json_values)
def test_canonicalize_is_idempotent_through_loads(value: Any) -> None:
    once = jcs.canonicalize(value)
    assert jcs.canonicalize(jcs.loads(once)) == once


@PROPERTY
@given(json_values, st.randoms(use_true_random=False))
def test_member_insertion_order_is_irrelevant(value: Any, rnd: random.Random) -> None:
    assert jcs.canonicalize(_shuffle_members(value, rnd)) == jcs.canonicalize(value)


@PROPERTY
@given(json_values, st.sampled_from([None, 0, 2]), st.booleans())
def test_any_json_spelling_canonicalizes_to_the_same_bytes(
    value: Any, indent: int | None, ascii_only: bool
) -> None:
    spelled = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    assert jcs.canonicalize(jcs.loads(spelled)) == jcs.canonicalize(value)


@PROPERTY
@given(json_values)
def test_canonical_output_is_sorted_by_utf16_at_top_level(value: Any) -> None:
    if not isinstance(value, dict):
        value = {"k": value}
    names = list(json.loads(jcs.canonicalize(value), object_pairs_hook=lambda p: p))
    keys = [name for name, _ in names]
    assert keys == sorted(keys, key=lambda name: name.encode("utf-16-be", "surrogatepass"))


@pytest.mark.parametrize("value", [2.0**53, -(2.0**53), 1e20, 2.0**68, 999999999999999900000.0])
def test_canonical_bytes_of_large_integral_doubles_decode_to_the_same_double(
    value: float,
) -> None:
    assert jcs.loads(jcs.canonicalize(value)) == value
