"""Decisions (§6): ``request`` (what a decision is asked: options, schema, the turn's spec),
``decide`` (the service: one decision, or several at a time) and ``small`` (a decision on a
small model: the likeliest option, then its reason)."""

__all__: list[str] = []
