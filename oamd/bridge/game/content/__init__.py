"""``content/generate``: the handler and its params."""
