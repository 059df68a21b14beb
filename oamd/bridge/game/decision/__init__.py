"""``decision/decide`` and ``decision/decideMany``: handlers, params and wire shapes."""
