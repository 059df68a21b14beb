"""The bridge protocol v1.0 wire contract (protocol/bridge.json, protocol/errors.json) for tests.

Import the validators; each raises AssertionError with the failing path and message when a
message does not match the contract, and KeyError for an unknown method name.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

__all__ = [
    "CONTRACT",
    "ERRORS",
    "ERROR_TABLE",
    "METHODS",
    "NOTIFICATIONS",
    "PROTOCOL_DIR",
    "validate_client_request",
    "validate_error",
    "validate_notification",
    "validate_params",
    "validate_result",
]

PROTOCOL_DIR = Path(__file__).resolve().parent.parent / "protocol"

CONTRACT: dict[str, Any] = json.loads((PROTOCOL_DIR / "bridge.json").read_text(encoding="utf-8"))
ERRORS: list[dict[str, Any]] = json.loads(
    (PROTOCOL_DIR / "errors.json").read_text(encoding="utf-8")
)

ERROR_TABLE: dict[str, int] = {row["name"]: row["code"] for row in ERRORS}
METHODS: list[str] = list(CONTRACT["methods"])
NOTIFICATIONS: list[str] = list(CONTRACT["notifications"])

_ERROR_ROWS: frozenset[tuple[int, str]] = frozenset((row["code"], row["name"]) for row in ERRORS)


def _subschema(section: str, method: str, part: str | None) -> dict[str, Any] | bool:
    entry = CONTRACT[section][method]  # KeyError for an unknown method
    return entry if part is None else entry[part]


@cache
def _validator(section: str, method: str, part: str | None) -> Draft202012Validator:
    schema = _subschema(section, method, part)
    if isinstance(schema, bool):
        schema = {} if schema else {"not": {}}
    root = {
        "$schema": CONTRACT["$schema"],
        "$defs": CONTRACT["$defs"],
        "allOf": [schema],
    }
    return Draft202012Validator(root)


def _check(label: str, validator: Draft202012Validator, instance: Any) -> None:
    errors = list(validator.iter_errors(instance))
    if not errors:
        return
    error = best_match(errors)
    where = "/".join(str(p) for p in error.absolute_path) or "<root>"
    others = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    raise AssertionError(
        f"{label}: at {where}: {error.message}{others}\n"
        f"  schema path: {'/'.join(str(p) for p in error.absolute_schema_path)}\n"
        f"  instance: {json.dumps(instance, ensure_ascii=False)[:500]}"
    )


def validate_params(method: str, params: dict[str, Any]) -> None:
    """Checks the params a client sends for `method`."""
    _check(f"{method} params", _validator("methods", method, "params"), params)


def validate_result(method: str, result: dict[str, Any]) -> None:
    """Checks the result the daemon returns for `method`."""
    _check(f"{method} result", _validator("methods", method, "result"), result)


def validate_notification(method: str, params: dict[str, Any]) -> None:
    """Checks the params of a notification the daemon sends (session/event, tool/cancel, …)."""
    _check(f"{method} notification", _validator("notifications", method, None), params)


def validate_client_request(method: str, params: dict[str, Any]) -> None:
    """Checks the params of a request the daemon sends to the client (tool/call)."""
    _check(f"{method} request", _validator("clientRequests", method, "params"), params)


def validate_error(error: dict[str, Any]) -> None:
    """Checks a JSON-RPC error object and that (code, data.code) is a row of errors.json."""
    _check("error", _validator_for_def("ErrorObject"), error)
    pair = (error["code"], error["data"]["code"])
    assert pair in _ERROR_ROWS, f"error: ({pair[0]}, {pair[1]!r}) is not a row of errors.json"


@cache
def _validator_for_def(name: str) -> Draft202012Validator:
    return Draft202012Validator(
        {"$schema": CONTRACT["$schema"], "$defs": CONTRACT["$defs"], "$ref": f"#/$defs/{name}"}
    )
