"""CEL device selectors, evaluated the way Kubernetes' DRA CEL environment does.

The environment (k8s.io/dynamic-resource-allocation/cel/compile.go): one variable
`device` with `driver`, `attributes[domain][id]` (int, bool, string or semver version)
and `capacity[domain][id]` (a Quantity); a domain no attribute has reads as an empty
map, so `device.attributes['x'].y` is a "no such key" error, as in the scheduler, and
`.?y.orValue(...)` is not. Besides CEL's standard library, the Kubernetes base
environment's optional types, strings, `cel.bind`, math, and the quantity and semver
libraries (k8s.io/apiserver/pkg/cel/library quantity.go, semver.go).

The runtime is cel-expr-python (CEL's C++ runtime; chosen by measurement, see
docs/dra.md). It does no I/O. Quantities and versions travel through it as one-key
maps ({QUANTITY: "exact value"}), so they compare equal when their values are equal
and no arithmetic operator applies to them, as in Kubernetes; the library's own
functions unwrap them.

An expression this environment cannot compile or evaluate is reported as such by the
caller, never taken as a match or a miss. Results are cached per (expression, slice):
a slice is immutable, so a watch event re-evaluates only the slice it changed.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

from webhook.core.dra.model import Device, Slice, Version
from webhook.core.kit.quantity import quantity_or_none

QUANTITY = "__kubernetes.Quantity__"
SEMVER = "__kubernetes.Semver__"

# One device's outcome: True, False, or the runtime error's text.
Outcome = bool | str


class SelectorError(Exception):
    """The expression does not compile in this environment."""


def _q(value: Fraction) -> dict[str, str]:
    return {QUANTITY: str(value)}


def _unwrap_q(value: Any) -> Fraction:
    if isinstance(value, dict) and QUANTITY in value:
        return Fraction(value[QUANTITY])
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(value)
    raise ValueError(f"not a quantity: {value!r}")


def _quantity(text: str) -> dict[str, str]:
    found = quantity_or_none(text)
    if found is None:
        raise ValueError(f"quantities must match the regular expression: {text!r}")
    return _q(found)


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?$"
)


@lru_cache(maxsize=1024)
def _semver_key(text: str) -> tuple[Any, ...]:
    m = _SEMVER.match(text)
    if m is None:
        raise ValueError(f"could not parse {text!r} as a semantic version")
    pre = m.group(4)
    # Semver 2.0.0 precedence: a pre-release sorts before the release; its numeric
    # identifiers numerically, below alphanumeric ones.
    pre_key: tuple[Any, ...] = (
        (1,)
        if pre is None
        else (0, *((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")))
    )
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)), pre_key)


def _semver(text: str) -> dict[str, str]:
    _semver_key(text)
    return {SEMVER: text}


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, dict) and SEMVER in a:
        if not (isinstance(b, dict) and SEMVER in b):
            raise ValueError("compareTo: a semver compares only with a semver")
        x, y = _semver_key(a[SEMVER]), _semver_key(b[SEMVER])
    else:
        x, y = _unwrap_q(a), _unwrap_q(b)  # type: ignore[assignment]
    return int(x > y) - int(x < y)


def _part(index: int) -> Callable[[Any], int]:
    def get(v: Any) -> int:
        return int(_semver_key(v[SEMVER])[index])

    return get


def _is(parse: Callable[[str], Any]) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            parse(text)
        except ValueError:
            return False
        return True

    return check


def _functions(cel: Any) -> list[Any]:
    m = cel.Type.Map(cel.Type.STRING, cel.Type.STRING)
    s, i, b, d = cel.Type.STRING, cel.Type.INT, cel.Type.BOOL, cel.Type.DOUBLE

    def fn(name: str, ret: Any, params: Sequence[Any], impl: Any, member: bool = False) -> Any:
        ident = f"k8s_{name}_{len(params)}_{'m' if member else 'g'}"
        return cel.FunctionDecl(
            name, [cel.Overload(ident, ret, list(params), is_member=member, impl=impl)]
        )

    def as_int(v: Any) -> int:
        q = _unwrap_q(v)
        if q.denominator != 1 or not -(2**63) <= q < 2**63:
            raise ValueError("cannot convert value to integer")
        return int(q)

    return [
        fn("quantity", m, [s], _quantity),
        fn("isQuantity", b, [s], _is(_quantity)),
        fn("semver", m, [s], _semver),
        fn("isSemver", b, [s], _is(_semver)),
        fn("compareTo", i, [m, m], _compare, True),
        fn("isGreaterThan", b, [m, m], lambda a, c: _compare(a, c) > 0, True),
        fn("isLessThan", b, [m, m], lambda a, c: _compare(a, c) < 0, True),
        fn("sign", i, [m], lambda a: (_unwrap_q(a) > 0) - (_unwrap_q(a) < 0), True),
        fn("asInteger", i, [m], as_int, True),
        fn("isInteger", b, [m], lambda a: _unwrap_q(a).denominator == 1, True),
        fn("asApproximateFloat", d, [m], lambda a: float(_unwrap_q(a)), True),
        fn("add", m, [m, m], lambda a, c: _q(_unwrap_q(a) + _unwrap_q(c)), True),
        fn("sub", m, [m, m], lambda a, c: _q(_unwrap_q(a) - _unwrap_q(c)), True),
        fn("major", i, [m], _part(0), True),
        fn("minor", i, [m], _part(1), True),
        fn("patch", i, [m], _part(2), True),
    ]


_ENV_LOCK = threading.Lock()
_ENV: Any = None
_BOOL: Any = None  # cel.Type.BOOL and cel.Type.ERROR, once the library is loaded
_ERROR: Any = None


def _env() -> Any:
    """The CEL environment, built on first use. The library is imported here, not at
    module import: it costs ~40 ms of start-up, which a `check` of manifests without
    any DRA selector (nearly every pull request) never needs."""
    global _ENV, _BOOL, _ERROR
    with _ENV_LOCK:
        if _ENV is None:
            from cel_expr_python import cel  # type: ignore[import-untyped]
            from cel_expr_python.ext import (  # type: ignore[import-untyped]
                ext_bindings,
                ext_math,
                ext_optional,
                ext_strings,
            )

            _BOOL, _ERROR = cel.Type.BOOL, cel.Type.ERROR
            _ENV = cel.NewEnv(
                variables={"device": cel.Type.DYN},
                extensions=[
                    ext_optional.ExtOptional(),
                    ext_strings.ExtStrings(),
                    ext_bindings.ExtBindings(),
                    ext_math.ExtMath(),
                ],
                functions=_functions(cel),
            )
        return _ENV


_LITERAL = re.compile(r"""(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")""")


class Selector:
    """One compiled expression, with the domains its string literals may name."""

    __slots__ = ("domains", "expression", "program")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        try:
            self.program = _env().compile(expression)
        except RuntimeError as exc:
            raise SelectorError(_first_line(str(exc))) from None
        # A domain the device has no attribute in reads as an empty map (compile.go's
        # mapper): give every literal that could be one an empty map.
        self.domains = tuple({a or b for a, b in _LITERAL.findall(expression) if "." in (a or b)})

    def run(self, device: Device) -> Outcome:
        value = self.program.eval(data={"device": _activation(device, self.domains)})
        kind = value.type()
        if kind == _BOOL:
            return bool(value.value())
        if kind == _ERROR:
            return _first_line(str(value.value()))
        return f"the expression evaluates to {kind.name().lower()}, not bool"


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else text
    return line.removeprefix("INVALID_ARGUMENT: ").removesuffix(" [INVALID_ARGUMENT]")


def _activation(device: Device, domains: tuple[str, ...]) -> dict[str, Any]:
    attributes: dict[str, dict[str, Any]] = {
        domain: {k: {SEMVER: v.text} if isinstance(v, Version) else v for k, v in values.items()}
        for domain, values in device.attributes.items()
    }
    capacity: dict[str, dict[str, Any]] = {
        domain: {k: _q(v) for k, v in values.items()} for domain, values in device.capacity.items()
    }
    for domain in domains:
        attributes.setdefault(domain, {})
        capacity.setdefault(domain, {})
    return {
        "driver": device.driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": device.shared,
    }


class SelectorCache:
    """Compiled selectors and their per-slice outcomes, bounded.

    Shared by every inventory generation: an entry is the slice object it was computed
    on, so a slice that a watch event replaced misses and is evaluated again, alone."""

    def __init__(self, max_selectors: int = 512) -> None:
        self._max = max_selectors
        self._lock = threading.Lock()
        self._compiled: OrderedDict[str, Selector | SelectorError] = OrderedDict()
        self._results: dict[str, dict[str, tuple[Slice, tuple[Outcome, ...]]]] = {}

    def selector(self, expression: str) -> Selector:
        """The compiled selector; raises SelectorError when it does not compile here."""
        with self._lock:
            found = self._compiled.get(expression)
            if found is not None:
                self._compiled.move_to_end(expression)
        if found is None:
            try:
                found = Selector(expression)
            except SelectorError as exc:
                found = exc
            with self._lock:
                self._compiled[expression] = found
                while len(self._compiled) > self._max:
                    old, _ = self._compiled.popitem(last=False)
                    self._results.pop(old, None)
        if isinstance(found, SelectorError):
            raise found
        return found

    def outcomes(self, expression: str, slice_: Slice) -> tuple[Outcome, ...]:
        """The expression on each device of the slice, in device order."""
        selector = self.selector(expression)
        per_slice = self._results.setdefault(expression, {})
        hit = per_slice.get(slice_.name)
        if hit is not None and hit[0] is slice_:
            return hit[1]
        result = tuple(selector.run(d) for d in slice_.devices)
        per_slice[slice_.name] = (slice_, result)
        return result

    def forget(self, slices: Mapping[str, Slice]) -> None:
        """Drop outcomes of slices that are gone (called with the current slices)."""
        with self._lock:
            for per_slice in self._results.values():
                for name in [n for n in per_slice if n not in slices]:
                    del per_slice[name]


CACHE = SelectorCache()
