"""The game extension: ``npc/*``, ``world/*``, ``decision/*``, ``content/generate``, and the
stores it opens on a connection (``stores``)."""
