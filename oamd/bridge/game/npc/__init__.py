"""``npc/*`` and ``npc/event``: handlers, params, saved state and wire shapes."""
