"""``world/*`` and ``world/changed``: handlers and wire shapes."""
