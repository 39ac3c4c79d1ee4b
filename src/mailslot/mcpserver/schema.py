"""Check a tool call's arguments against the tool's own input schema, before any channel call.

The SDK's low-level server passes arguments through unchecked, and a model fills them in, so the
schema each tool advertises is also the gate it passes: unknown fields, missing required ones,
wrong types, values outside an ``enum`` or a bound are refused with one line naming the field.
Only the keywords our schemas use are understood (``type`` string/integer/number/boolean/array of
strings, ``enum``, ``minimum``, ``maximum``, ``minLength``, ``maxLength``, ``default``, ``items``,
``maxItems``); an unknown keyword in a schema is a programming error caught by the tests.

Numbers are bounded on both sides (every numeric property declares ``minimum`` and ``maximum``,
a test checks it) and must be finite, so no value a model sends -- ``1e30``, ``NaN`` -- reaches a
channel as something it cannot hold. An integer may arrive as an integral float (``5.0``, which
JSON Schema counts as an integer); it is passed on as an ``int``.
"""

from __future__ import annotations

import math
from typing import Any

from mailslot.core.errors import FormatError

__all__ = ["KNOWN_KEYWORDS", "validate"]

KNOWN_KEYWORDS = frozenset(
    {"type", "description", "enum", "minimum", "maximum", "minLength", "maxLength", "default"}
    | {"items", "maxItems"}
)

_PY: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
}


def _is(value: Any, kind: str) -> bool:
    return isinstance(value, _PY[kind])


def _check(name: str, value: Any, spec: dict[str, Any]) -> Any:
    kind = spec["type"]
    if isinstance(value, bool) and kind != "boolean":
        raise FormatError(f"expected {kind}, got a boolean", field=name)
    if kind in ("number", "integer") and isinstance(value, float):
        if not math.isfinite(value):
            raise FormatError(f"must be a finite number, got {value}", field=name)
        if kind == "integer" and value.is_integer():
            value = int(value)
    if not _is(value, kind):
        raise FormatError(f"expected {kind}, got {type(value).__name__}", field=name)
    if kind == "array":
        for item in value:
            _check(name, item, spec["items"])
    if "enum" in spec and value not in spec["enum"]:
        allowed = ", ".join(str(v) for v in spec["enum"])
        raise FormatError(f"must be one of {allowed}, got {value!r}", field=name)
    if "minimum" in spec and value < spec["minimum"]:
        raise FormatError(f"must be at least {spec['minimum']}, got {value}", field=name)
    if "maximum" in spec and value > spec["maximum"]:
        raise FormatError(f"must be at most {spec['maximum']}, got {value}", field=name)
    if "maxItems" in spec and len(value) > spec["maxItems"]:
        raise FormatError(f"must have at most {spec['maxItems']} items", field=name)
    if "minLength" in spec and len(value) < spec["minLength"]:
        raise FormatError(f"must have at least {spec['minLength']} characters", field=name)
    if "maxLength" in spec and len(value) > spec["maxLength"]:
        raise FormatError(f"must have at most {spec['maxLength']} characters", field=name)
    return value


def validate(schema: dict[str, Any], arguments: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments with defaults filled in; ``FormatError`` naming the first bad field."""
    args = dict(arguments or {})
    props: dict[str, dict[str, Any]] = schema.get("properties", {})
    extra = sorted(set(args) - set(props))
    if extra:
        known = ", ".join(props) or "none"
        raise FormatError(f"unknown argument(s) {', '.join(extra)} (arguments: {known})")
    for name in schema.get("required", []):
        if name not in args or args[name] is None:
            raise FormatError("is required", field=name)
    out: dict[str, Any] = {}
    for name, spec in props.items():
        if name in args and args[name] is not None:
            out[name] = _check(name, args[name], spec)
        else:
            out[name] = spec.get("default")
    return out
