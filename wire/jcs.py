"""RFC 8785 JSON Canonicalization Scheme, and the strict decoder.

Canonical bytes are what the protocol compares: envelope conflict equality
(v1.md "Message representation") and the ``none`` plaintext, which a reader
must re-encode and byte-compare. The encoder therefore follows RFC 8785
exactly: object members sorted by the UTF-16 code units of their names
(§3.2.3), strings escaped with the minimal JSON escapes (§3.2.2.2) and
numbers in ECMAScript ``Number.prototype.toString`` form (§3.2.2.3).

The decoder is deliberately stricter than :func:`json.loads`: it rejects
duplicate member names at every depth, lone surrogates (escaped or not),
``NaN``/``Infinity``, numbers a JavaScript peer cannot hold exactly, invalid
UTF-8, nesting deeper than :data:`wire.limits.MAX_JSON_DEPTH` and any data
after the value (RFC 8785 §3.1 requires I-JSON input, RFC 7493).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from wire.errors import CanonicalJsonError
from wire.limits import MAX_JSON_DEPTH, MAX_SAFE_INTEGER

__all__ = ["canonicalize", "dumps", "format_number", "loads"]

_encode_string = json.encoder.encode_basestring


def _utf16_key(name: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly as UTF-16 code-unit sequences.
    return name.encode("utf-16-be", "surrogatepass")


def format_number(value: float | int) -> str:
    """Serialize a number as ECMAScript's ``Number.prototype.toString`` would.

    RFC 8785 §3.2.2.3: integers outside the IEEE-754 exact range and
    non-finite values have no canonical form and are refused.
    """
    if isinstance(value, bool):
        raise CanonicalJsonError("", "a boolean is not a number")
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise CanonicalJsonError("", "integer outside the I-JSON exact range (±2^53−1)")
        return str(value)
    if not math.isfinite(value):
        raise CanonicalJsonError("", "NaN and Infinity have no JSON form")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr() gives the shortest digits that round-trip, as ECMAScript requires.
    text = repr(abs(value))
    mantissa, _, exp_text = text.partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # Position of the decimal point relative to the start of `digits`.
    point = len(int_part) + (int(exp_text) if exp_text else 0)
    point -= len(int_part + frac_part) - len((int_part + frac_part).lstrip("0"))
    digits = digits.rstrip("0") or "0"
    k, n = len(digits), point
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        exponent = n - 1
        exp_sign = "+" if exponent >= 0 else "-"
        head = digits[0] + ("." + digits[1:] if k > 1 else "")
        body = f"{head}e{exp_sign}{abs(exponent)}"
    return sign + body


def _encode(value: Any, out: list[str], depth: int) -> None:
    if depth > MAX_JSON_DEPTH:
        raise CanonicalJsonError("", f"nesting deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, str):
        out.append(_encode_string(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int | float):
        out.append(format_number(value))
    elif isinstance(value, dict):
        for name in value:
            if not isinstance(name, str):
                raise CanonicalJsonError("", "object member names must be strings")
        out.append("{")
        first = True
        for name in sorted(value, key=_utf16_key):
            if not first:
                out.append(",")
            first = False
            out.append(_encode_string(name))
            out.append(":")
            _encode(value[name], out, depth + 1)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _encode(item, out, depth + 1)
        out.append("]")
    else:
        raise CanonicalJsonError("", f"{type(value).__name__} has no JSON form")


def canonicalize(value: Any) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of a JSON-compatible value."""
    out: list[str] = []
    _encode(value, out, 0)
    try:
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError:
        raise CanonicalJsonError("", "string contains a lone surrogate") from None


dumps = canonicalize


def _reject_constant(name: str) -> Any:
    raise CanonicalJsonError("", f"{name} is not valid JSON")


def _parse_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise CanonicalJsonError("", "number overflows IEEE-754 double precision")
    return number


def _parse_int(text: str) -> int | float:
    if len(text) <= 17:  # cheap bound before int(): 2^53 has 16 digits
        number = int(text)
        if abs(number) <= MAX_SAFE_INTEGER:
            return number
    # Beyond ±2^53−1 only the canonical spelling of a double is accepted (it is
    # what canonicalize emits for integral floats below 1e21, e.g. 1e20); any
    # other integer would silently round in a JavaScript peer.
    if len(text) <= 23:  # "-" and 22 digits: the longest canonical integer form
        double = float(text)
        if format_number(double) == text:
            return double
    raise CanonicalJsonError("", "integer outside the I-JSON exact range (±2^53−1)")


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise CanonicalJsonError(name, "duplicate object member name")
            seen.add(name)
    return obj


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


# A \uXXXX escape of a surrogate code unit: the only way a lone surrogate can
# enter a value decoded from valid UTF-8. Text without one cannot hold a lone
# surrogate, so the per-string check is skipped (a false positive, such as an
# escaped backslash before "ud800", only costs the full check).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _check_value(value: Any, depth: int, strings: bool) -> None:
    """Enforce the depth bound on containers and, if ``strings``, refuse
    lone surrogates in member names and string values."""
    if depth > MAX_JSON_DEPTH:
        raise CanonicalJsonError("", f"nesting deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, dict):
        items: Any = value.values()
        if strings:
            for name in value:
                if _has_lone_surrogate(name):
                    raise CanonicalJsonError("", "member name contains a lone surrogate")
    elif isinstance(value, list):
        items = value
    else:
        if strings and isinstance(value, str) and _has_lone_surrogate(value):
            raise CanonicalJsonError("", "string contains a lone surrogate")
        return
    if depth == MAX_JSON_DEPTH and len(value):
        # Scalars count as a level too, exactly as the encoder counts them.
        raise CanonicalJsonError("", f"nesting deeper than {MAX_JSON_DEPTH} levels")
    for item in items:
        if isinstance(item, dict | list):
            _check_value(item, depth + 1, strings)
        elif strings and isinstance(item, str) and _has_lone_surrogate(item):
            raise CanonicalJsonError("", "string contains a lone surrogate")


_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_object,
    parse_constant=_reject_constant,
    parse_float=_parse_float,
    parse_int=_parse_int,
)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode one strict I-JSON value; raise :class:`CanonicalJsonError` otherwise.

    Accepts surrounding JSON whitespace (it is not part of the value) but
    nothing else after the value.
    """
    if isinstance(data, str):
        text = data
        # Raw surrogates can only come from a str; bytes were checked as UTF-8.
        if _has_lone_surrogate(text):
            raise CanonicalJsonError("", "string contains a lone surrogate")
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CanonicalJsonError("", f"invalid UTF-8 at byte {exc.start}") from None
    try:
        value, end = _DECODER.raw_decode(text, _skip_ws(text, 0))
    except json.JSONDecodeError as exc:
        raise CanonicalJsonError("", f"invalid JSON: {exc.msg} at offset {exc.pos}") from None
    except RecursionError:
        raise CanonicalJsonError("", f"nesting deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # int() digit limits and similar
        raise CanonicalJsonError("", f"invalid number: {exc}") from None
    if _skip_ws(text, end) != len(text):
        raise CanonicalJsonError("", f"trailing data after the JSON value at offset {end}")
    _check_value(value, 0, _SURROGATE_ESCAPE.search(text) is not None)
    return value


def _skip_ws(text: str, pos: int) -> int:
    length = len(text)
    while pos < length and text[pos] in " \t\n\r":
        pos += 1
    return pos
