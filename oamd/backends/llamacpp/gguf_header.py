"""What a GGUF file says it is quantised as, read from its header without loading it.

Only the key-value section is read, up to ``general.file_type``, so a 1 GB model costs a few
reads. A file that is not GGUF (or a version this reader does not know, or one whose header
claims more than it could hold) answers ``None``: the caller then loads the file as it is.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

__all__ = ["FILE_TYPE_NAMES", "gguf_file_type"]

FILE_TYPE_KEY = "general.file_type"

FILE_TYPE_NAMES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    25: "IQ4_NL",
    30: "IQ4_XS",
    32: "BF16",
}
"""llama.cpp's ``llama_ftype`` values (``include/llama.h``) that this project names."""

_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
"""Byte sizes of GGUF's fixed-size value types (uint8 … float64, bool)."""
_STRING, _ARRAY, _UINT32 = 8, 9, 4
MAX_KEYS = 1 << 16
MAX_STRING_BYTES = 1 << 26
"""A header claiming more than these is not read further (a damaged or hostile file)."""


class _NotGGUF(Exception):
    pass


def _unpack(file: BinaryIO, fmt: str) -> int:
    size = struct.calcsize(fmt)
    data = file.read(size)
    if len(data) != size:
        raise _NotGGUF
    return int(struct.unpack(fmt, data)[0])


def _string(file: BinaryIO) -> bytes:
    length = _unpack(file, "<Q")
    if length > MAX_STRING_BYTES:
        raise _NotGGUF
    data = file.read(length)
    if len(data) != length:
        raise _NotGGUF
    return data


def _skip(file: BinaryIO, kind: int) -> None:
    if kind in _FIXED:
        file.seek(_FIXED[kind], 1)
    elif kind == _STRING:
        file.seek(_unpack(file, "<Q"), 1)
    elif kind == _ARRAY:
        item, count = _unpack(file, "<I"), _unpack(file, "<Q")
        if item in _FIXED:
            file.seek(_FIXED[item] * count, 1)
        elif item == _STRING:  # a vocabulary: each string has its own length
            for _ in range(count):
                file.seek(_unpack(file, "<Q"), 1)
        else:
            raise _NotGGUF  # arrays of arrays: no model file has them
    else:
        raise _NotGGUF


def gguf_file_type(path: Path) -> int | None:
    """The file's ``general.file_type`` (a ``llama_ftype``), or ``None`` when it has none or is
    not a GGUF file this reader knows (versions 2 and 3)."""
    try:
        with path.open("rb") as file:
            if file.read(4) != b"GGUF" or _unpack(file, "<I") not in (2, 3):
                return None
            _unpack(file, "<Q")  # tensor count
            keys = _unpack(file, "<Q")
            for _ in range(min(keys, MAX_KEYS)):
                key = _string(file)
                kind = _unpack(file, "<I")
                if key == FILE_TYPE_KEY.encode() and kind == _UINT32:
                    return _unpack(file, "<I")
                _skip(file, kind)
    except (OSError, _NotGGUF):
        return None
    return None
