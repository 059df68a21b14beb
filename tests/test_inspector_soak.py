"""The inspector soak's fast profile (``tests/inspector_soak.py``; a long run by hand:
``make soak-inspector``): scripted turns with hostile ids stream while API pollers, an event-stream
reader and hostile HTTP peers hammer the inspector; every request is answered once, as without
the inspector, and the inspector never answers 500."""

from __future__ import annotations

import anyio
import pytest
from inspector_soak import soak

pytestmark = pytest.mark.anyio

FAST_TURNS = 160


async def test_turns_with_hostile_ids_answer_as_without_the_inspector_while_pages_hammer_it(
    tmp_path,
):
    with anyio.fail_after(120):
        text, violations = await soak(FAST_TURNS, 20261202, str(tmp_path / "token"))
    print(text)
    assert violations == [], text
