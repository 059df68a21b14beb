"""The game layer (§6): NPCs, decisions, content generation and shared world state."""
