"""YAML values as Kubernetes reads them: sigs.k8s.io/yaml over go-yaml v2, then JSON.

kubectl (cli-runtime `StreamVisitor` -> apimachinery `YAMLOrJSONDecoder`) and the
apiserver (`serializer/json` with `Yaml: true`) turn a YAML document into JSON with
sigs.k8s.io/yaml v1.6.0 `YAMLToJSON` (yaml.go, commit 048d724): go.yaml.in/yaml/v2
v2.4.4 (commit 43b627a) unmarshals it into interface{}, `convertToJSONableObject` makes
every key a string, and encoding/json writes it. The object is what that JSON says, so
a value here is the composition of the three (docs/yaml.md has every difference from
PyYAML's SafeLoader, with the lines of the upstream code):

- a plain scalar resolves by go-yaml v2 `resolve.go` `resolve`: YAML 1.1 booleans
  (`y`, `n`, `on`, `off`, ...), ints by Go's `strconv.ParseInt(s, 0, 64)` after removing
  every `_` (`0x`, `0o`, `0b`, a leading `0` is octal), then uint64, then floats that
  match `yamlStyleFloat` (`1e3` too); no sexagesimal (`1:20` is a string); timestamps
  stay the text they were (decode.go `scalar` into interface{});
- a key becomes a string as `convertToJSONableObject` writes it (`1` -> "1", `y` ->
  "true", a float with `FormatFloat(f, 'g', -1, 32)`); a null or uint64 key is refused;
- a value is what encoding/json writes and a JSON reader reads back: a whole float below
  1e21 is an int (`8.0` -> 8), NaN and infinities are refused;
- a quoted scalar is a string; an explicit standard tag is checked as `resolve` checks
  it; any other tag keeps the text.
"""

from __future__ import annotations

import binascii
import math
import re
import struct
from typing import Any

import yaml

STR = "tag:yaml.org,2002:str"
NULL = "tag:yaml.org,2002:null"
BOOL = "tag:yaml.org,2002:bool"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
MERGE = "tag:yaml.org,2002:merge"
TIMESTAMP = "tag:yaml.org,2002:timestamp"
BINARY = "tag:yaml.org,2002:binary"
MAP = "tag:yaml.org,2002:map"
SEQ = "tag:yaml.org,2002:seq"
RESOLVED = frozenset((NULL, BOOL, INT, FLOAT))  # the tags `resolve` can give a plain scalar

_MEMO_VALUE_LIMIT = 64  # characters: longer scalars are resolved every time
_MEMO_ENTRIES = 1 << 16  # then the memo starts again: bounded whatever the input
_INT64 = 1 << 63
_UINT64 = 1 << 64


class KubeYAMLError(yaml.MarkedYAMLError):
    """Valid YAML that kubectl and the apiserver refuse to turn into JSON."""


class NotJSON:
    """A float JSON cannot write (NaN, +-Inf): encoding/json's UnsupportedValueError."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


# resolve.go `init` resolveMapList: the scalars looked up as they are.
_TABLE: dict[str, tuple[str, Any]] = {}
for _value, _tag, _spellings in (
    (True, BOOL, "y Y yes Yes YES true True TRUE on On ON"),
    (False, BOOL, "n N no No NO false False FALSE off Off OFF"),
    (None, NULL, "~ null Null NULL"),
    (math.nan, FLOAT, ".nan .NaN .NAN"),
    (math.inf, FLOAT, ".inf .Inf .INF +.inf +.Inf +.INF"),
    (-math.inf, FLOAT, "-.inf -.Inf -.INF"),
    ("<<", MERGE, "<<"),
):
    for _s in _spellings.split():
        _TABLE[_s] = (_tag, _value)
_TABLE[""] = (NULL, None)

# resolve.go `yamlStyleFloat`, matched against the scalar without its underscores.
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# What strconv.ParseFloat reads of a scalar that starts with "." (atof.go readFloat):
# digits and underscores, an optional exponent; underscores checked by _underscores_ok.
_DOT_FLOAT = re.compile(r"\.[0-9_]*[0-9][0-9_]*([eE][-+]?[0-9][0-9_]*)?")
_DIGITS = {
    2: re.compile(r"[01]*"),
    8: re.compile(r"[0-7]*"),
    10: re.compile(r"[0-9]*"),
    16: re.compile(r"[0-9a-fA-F]*"),
}
_PREFIX = {"b": 2, "B": 2, "o": 8, "O": 8, "x": 16, "X": 16}

_RESOLVED: dict[str, tuple[str, Any]] = {}  # plain scalar -> (tag, value as JSON reads it)


def plain(value: str) -> tuple[str, Any]:
    """The tag and the value of a plain scalar, memoised for short ones (the resolution
    is a pure function of the text, and manifests repeat the same keys and values)."""
    if len(value) > _MEMO_VALUE_LIMIT:
        return _as_json(*resolve(value))
    entry = _RESOLVED.get(value)
    if entry is None:
        entry = _as_json(*resolve(value))
        if len(_RESOLVED) >= _MEMO_ENTRIES:
            _RESOLVED.clear()
        _RESOLVED[value] = entry
    return entry


def resolve(value: str) -> tuple[str, Any]:
    """go-yaml v2 `resolve("", value)`: the tag and the Go value of a plain scalar."""
    item = _TABLE.get(value)
    if item is not None:
        return item
    first = value[0]
    if first == ".":  # hint '.': strconv.ParseFloat(in, 64)
        if _DOT_FLOAT.fullmatch(value) and _underscores_ok(value):
            real = float(value.replace("_", ""))
            if not math.isinf(real):  # ErrRange: not a float
                return FLOAT, real
    elif first in "+-0123456789":  # hints 'D' and 'S'
        bare = value.replace("_", "")
        whole = _parse_int(bare)
        if whole is None:
            whole = _parse_uint(bare)
        if whole is not None:
            return INT, whole
        if _YAML_STYLE_FLOAT.fullmatch(bare):
            real = float(bare)
            if not math.isinf(real):
                return FLOAT, real
        # The "0b" and "-0b" fallbacks after this in resolve.go cannot succeed where
        # ParseInt(s, 0, 64) and ParseUint failed: base 0 already reads "0b".
    return STR, value


def _parse_uint(text: str) -> int | None:
    """strconv.ParseUint(text, 0, 64): no sign; 0b/0o/0x prefixes, a leading 0 octal."""
    if not text:
        return None
    base = 10
    if text[0] == "0":
        prefixed = _PREFIX.get(text[1]) if len(text) >= 3 else None
        base, text = (8, text[1:]) if prefixed is None else (prefixed, text[2:])
    if not _DIGITS[base].fullmatch(text) or (base == 10 and len(text) > 20):
        return None
    number = int(text, base) if text else 0
    return number if number < _UINT64 else None


def _parse_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64): an optional sign, then ParseUint's digits."""
    negative = text[:1] == "-"
    number = _parse_uint(text[1:] if text[:1] in ("+", "-") else text)
    if number is None or number > _INT64 or (number == _INT64 and not negative):
        return None
    return -number if negative else number


def _underscores_ok(text: str) -> bool:
    """strconv `underscoreOK` for a decimal number: each "_" between two digits."""
    previous = "^"
    for c in text:
        if c == "_":
            if previous != "0":
                return False
            previous = "_"
        elif "0" <= c <= "9":
            previous = "0"
        elif previous == "_":
            return False
        else:
            previous = "!"
    return previous != "_"


def _as_json(tag: str, value: Any) -> tuple[str, Any]:
    """The value as encoding/json writes it and a JSON reader reads it back."""
    if type(value) is float:
        return tag, json_float(value)
    return tag, value


def json_float(value: float) -> Any:
    """A whole float below 1e21 is written without a point (encoding/json uses 'f'
    format there), so it reads back as an int; NaN and infinities cannot be written."""
    if math.isnan(value) or math.isinf(value):
        return NotJSON(_go_float_text(value))
    if value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def tagged(node: yaml.ScalarNode) -> Any:
    """The value of a scalar with an explicit tag, as go-yaml v2 `resolve(tag, in)` and
    decode.go `scalar` give it: a standard tag must fit the text (`!!float 1` is 1.0);
    `!!binary` is base64; any other tag keeps the text."""
    tag, text = node.tag, node.value
    if tag in RESOLVED:
        found, value = plain(text)
        if found == tag:
            return value
        if tag == FLOAT and found == INT:
            return json_float(float(value))
        raise refused(node, f"cannot decode {_short(found)} `{text}` as a {_short(tag)}")
    if tag == TIMESTAMP:
        if not _timestamp(text):
            found, _ = plain(text)
            raise refused(node, f"cannot decode {_short(found)} `{text}` as a !!timestamp")
        return text  # decode.go: a timestamp into interface{} stays its text
    if tag == BINARY:
        return _binary(node)
    return text


def json_key(node: yaml.ScalarNode) -> str:
    """A mapping key as convertToJSONableObject writes it (yaml.go): the Go value of
    the key (before JSON: `1.0` is a float64) written as a string."""
    tag = node.tag
    if tag == STR:
        return str(node.value)
    if tag not in RESOLVED:
        return str(tagged(node))  # a timestamp, binary or unknown tag: a string
    found, value = resolve(node.value)
    if found != tag:
        if not (tag == FLOAT and found == INT):
            tagged(node)  # raises: the text does not fit its tag
        value = float(value)
    if value is None:
        raise refused(node, "a null key cannot be a JSON object key")
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int:
        if value >= _INT64:
            raise refused(node, f"the key {value} is a uint64, which cannot be a JSON object key")
        return str(value)
    return _float32_g(value)


def _float32_g(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32), with go-yaml's names for the specials."""
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        single = math.copysign(math.inf, value)
    if math.isnan(single) or math.isinf(single):
        return _go_float_text(single)
    if single == 0:
        return "-0" if math.copysign(1, single) < 0 else "0"
    for precision in range(9):
        text = f"{single:.{precision}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            break
    mantissa, exponent = text.split("e")
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    exp = int(exponent)
    if exp < -4 or exp >= 6:  # 'g' with the shortest digits: %e outside [1e-4, 1e6)
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{fraction}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    point = exp + 1
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _go_float_text(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    return ".inf" if value > 0 else "-.inf"


# resolve.go allowedTimestampFormats, as time.Parse reads them: "2006-1-2T15:4:5.999999999Z07:00"
# (and with "t"), "2006-1-2 15:4:5.999999999", "2006-1-2".
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(?:[.,]\d+)?(?:Z|[+-]\d\d:\d\d)"
    r"| (\d{1,2}):(\d{1,2}):(\d{1,2})(?:[.,]\d+)?)?"
)
_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _timestamp(text: str) -> bool:
    found = _TIMESTAMP.fullmatch(text)
    if found is None:
        return False
    year, month, day = (int(found.group(i)) for i in (1, 2, 3))
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not 1 <= month <= 12 or not 1 <= day <= _DAYS[month - 1] - (month == 2 and not leap):
        return False
    clock = [int(g) for g in found.groups()[3:] if g is not None]
    return not clock or (clock[0] < 24 and clock[1] < 60 and clock[2] < 60)


def _binary(node: yaml.ScalarNode) -> str:
    """`!!binary`: base64.StdEncoding (newlines skipped), then the bytes as a JSON string:
    encoding/json writes each byte that is not UTF-8 as U+FFFD (sigs.k8s.io/yaml's
    yaml_test.go "binary data": `gIGC` is "\ufffd\ufffd\ufffd")."""
    text = node.value.replace("\n", "").replace("\r", "")
    try:
        data = binascii.a2b_base64(text.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        raise refused(node, "!!binary value contains invalid base64 data") from None
    decoded = data.decode("utf-8", "surrogateescape")
    return re.sub("[\udc80-\udcff]", "\ufffd", decoded)


def _short(tag: str) -> str:
    return "!!" + tag.removeprefix("tag:yaml.org,2002:")


def refused(node: yaml.Node, problem: str) -> KubeYAMLError:
    """The error for what kubectl and the apiserver refuse, at the node's line."""
    return KubeYAMLError(None, None, problem, node.start_mark)


class KubeResolver:
    """Mixin for a PyYAML loader: tags as go-yaml v2 resolves them (plain scalars by
    `resolve`, quoted ones strings), so nothing of PyYAML's YAML 1.1 regexps is left."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode:
            return plain(value)[0] if implicit[0] else STR
        return MAP if kind is yaml.MappingNode else SEQ
