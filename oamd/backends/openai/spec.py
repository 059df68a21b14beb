"""The options of an ``openai:`` model spec (``<base-url>[#<model>][?option=value&…]``): each
turned into the ``OpenAIModel`` keyword it sets, or a ``ValueError`` that names the option and
what it takes, and the API key read from the environment."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

from oamd.backends.openai.wire import JsonMode

__all__ = ["API_KEY_VARIABLES", "SPEC_OPTIONS", "api_key", "parse_options"]

API_KEY_VARIABLES = ("OAMD_OPENAI_API_KEY", "OPENAI_API_KEY")
"""Environment variables read, in order, for the ``Authorization: Bearer`` key."""

_TOOLS_OPTIONS = {"native": True, "envelope": False}
_JSON_OPTIONS: dict[str, JsonMode] = {
    "json_schema": "json_schema",
    "json_object": "json_object",
    "none": "none",
}
_SWITCH_OPTIONS = {"on": True, "off": False}
_PROMPTS_OPTIONS = {"compact": "compact", "full": "full"}
_CHOICES_OPTIONS = {"likelihood": "likelihood", "generation": "generation"}
SPEC_OPTIONS = (
    "tools",
    "json",
    "ctx",
    "max_output",
    "timeout",
    "deadline",
    "max_in_flight",
    "top_k",
    "usage",
    "prompts",
    "choices",
)


def api_key(environ: Mapping[str, str]) -> str | None:
    for variable in API_KEY_VARIABLES:
        value = environ.get(variable)
        if value:
            return value
    return None


def parse_options(query: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key == "tools":
            options["native_tools"] = _choice(key, value, _TOOLS_OPTIONS)
        elif key == "json":
            options["json_mode"] = _choice(key, value, _JSON_OPTIONS)
        elif key == "ctx":
            options["context_size"] = _positive_int(key, value)
        elif key == "max_output":
            options["max_output_tokens"] = _positive_int(key, value)
        elif key == "timeout":
            options["read_timeout"] = _seconds(key, value)
        elif key == "deadline":
            options["step_deadline"] = _seconds(key, value)
        elif key == "max_in_flight":
            options["max_in_flight"] = _positive_int(key, value)
        elif key == "top_k":
            options["sampling_extensions"] = _choice(key, value, _SWITCH_OPTIONS)
        elif key == "usage":
            options["include_usage"] = _choice(key, value, _SWITCH_OPTIONS)
        elif key == "prompts":
            options["prompts"] = _choice(key, value, _PROMPTS_OPTIONS)
        elif key == "choices":
            options["choices"] = _choice(key, value, _CHOICES_OPTIONS)
        else:
            raise ValueError(
                f"openai: unknown option {key!r}; known options: {', '.join(SPEC_OPTIONS)}"
            )
    if options.get("choices") == "likelihood" and options.get("prompts") != "compact":
        raise ValueError("openai: option 'choices=likelihood' needs 'prompts=compact'")
    return options


def _seconds(key: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < math.inf:
        raise ValueError(f"openai: option {key!r} must be seconds > 0; got {value!r}")
    return seconds


def _choice(key: str, value: str, allowed: Mapping[str, Any]) -> Any:
    if value not in allowed:
        raise ValueError(
            f"openai: option {key!r} must be one of {', '.join(allowed)}; got {value!r}"
        )
    return allowed[value]


def _positive_int(key: str, value: str) -> int:
    if not value.isdigit() or int(value) <= 0:
        raise ValueError(f"openai: option {key!r} must be a positive integer; got {value!r}")
    return int(value)
