"""``docs/ARCHITECTURE.md`` names every module under ``oamd/``, and every module it names exists.

A module is named in one of two ways:

- anywhere in the document, by its path under ``oamd/`` (``bridge/game/stores.py``, with or
  without ``oamd/`` in front), not as the tail of a longer path (``game/npc/methods.py`` is not
  ``bridge/game/npc/methods.py``);
- in the layer block (the fenced block of the "Layers" section), by its file name alone
  (``stores.py``) inside the entry of its own folder. A line whose text starts with a folder
  (``game/``, then spaces) opens that folder's entry, inside the entry of the nearest line above
  it that is indented less; the entry ends at the next line indented as much or less. Only the
  folder's own entry counts: ``encode.py`` in the ``bridge/`` entry does not name
  ``bridge/session/encode.py``.

A file name outside every entry is a path under ``oamd/`` (the root modules: ``errors.py``). A path
whose first folder is one of the repository's other folders (``tests/``, ``bench/``,
``protocol/``…) is not a module path and is not checked. Every folder under ``oamd/`` that holds
modules has an entry, and every entry is a folder that exists, so a line misread as an entry fails
too. ``__init__.py`` and ``__main__.py`` need not be named (they may be); the inspector's page files
are not modules."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OAMD = REPO / "oamd"
DOC = REPO / "docs" / "ARCHITECTURE.md"

EXEMPT = frozenset({"__init__.py", "__main__.py"})
"""Module files that need not be named: a package's own file and ``python -m oamd``."""

MODULE = re.compile(r"(?<![\w/.])((?:\w+/)*\w+\.py)(?![\w/])")
"""A ``.py`` path or file name, not part of a longer path or dotted name."""

ENTRY = re.compile(r"^( *)((?:\w+/)+)(?=\s|$)")
"""A layer-block line that opens a folder's entry: its indentation and the folder."""

OTHER_FOLDERS = frozenset(
    p.name for p in REPO.iterdir() if p.is_dir() and not (OAMD / p.name).is_dir()
) - {"oamd"}
"""The repository's folders beside ``oamd/``: paths under them are not module paths."""


def _modules() -> set[str]:
    """Every module under ``oamd/``, as its path there."""
    return {
        p.relative_to(OAMD).as_posix()
        for p in OAMD.rglob("*.py")
        if "__pycache__" not in p.parts and p.name not in EXEMPT
    }


def _module_folders() -> set[str]:
    """Every folder under ``oamd/`` holding modules, as ``bridge/game/``."""
    return {
        p.parent.relative_to(OAMD).as_posix() + "/"
        for p in OAMD.rglob("*.py")
        if "__pycache__" not in p.parts and p.parent != OAMD
    }


def _split(text: str) -> tuple[list[str], str]:
    """The layer block's lines, and the rest of the document."""
    section = text.index("\n## Layers")
    start = text.index("```\n", section) + len("```\n")
    end = text.index("\n```", start)
    return text[start:end].split("\n"), text[:start] + text[end:]


def _path(token: str) -> str | None:
    """The module path a token with a folder names, or ``None`` when it is not under ``oamd/``."""
    token = token.removeprefix("oamd/")
    return None if token.split("/", 1)[0] in OTHER_FOLDERS else token


def _read(text: str) -> tuple[set[str], set[str]]:
    """The module paths the document names, and the entries of its layer block."""
    block, rest = _split(text)
    named: set[str] = set()
    entries: set[str] = set()
    for token in MODULE.findall(rest):
        path = _path(token) if "/" in token else token
        if path is not None:
            named.add(path)
    stack: list[tuple[int, str]] = []  # (indentation, folder) of the entries a line is inside
    for line in block:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        opened = ENTRY.match(line)
        if opened:
            folder = (stack[-1][1] if stack else "") + opened.group(2)
            stack.append((indent, folder))
            entries.add(folder)
        folder = stack[-1][1] if stack else ""
        for token in MODULE.findall(line):
            path = _path(token) if "/" in token else folder + token
            if path is not None:
                named.add(path)
    return named, entries


def test_every_module_is_named() -> None:
    named, _ = _read(DOC.read_text(encoding="utf-8"))
    assert sorted(_modules() - named) == []


def test_every_module_named_exists() -> None:
    named, _ = _read(DOC.read_text(encoding="utf-8"))
    assert sorted(path for path in named if not (OAMD / path).is_file()) == []


def test_every_folder_of_modules_has_an_entry_and_every_entry_is_one() -> None:
    _, entries = _read(DOC.read_text(encoding="utf-8"))
    assert sorted(_module_folders() - entries) == []
    assert sorted(folder for folder in entries if not (OAMD / folder).is_dir()) == []


def test_the_reading_is_strict() -> None:
    """A file name counts only in its own folder's entry, and a path only from ``oamd/`` down."""
    doc = (
        "# doc\n\n## Layers\n\n```\nbridge/        encode.py\n  session/     methods.py\n"
        "game/          npc/talk.py\nleaves         oamd/errors.py, limits.py\n```\n\n"
        "game/npc/methods.py, bridge/x/y.py, log.py; tests/t.py, oamd.x.py\n"
    )
    named, entries = _read(doc)
    assert entries == {"bridge/", "bridge/session/", "game/"}
    assert named == {
        "bridge/encode.py",
        "bridge/session/methods.py",
        "npc/talk.py",  # a path with a folder is a path under oamd/, wherever it stands
        "errors.py",
        "limits.py",  # outside every entry: a root module
        "game/npc/methods.py",
        "bridge/x/y.py",
        "log.py",
    }
