"""The scripted backend: deterministic scripts for tests and CI (protocol/SCRIPTED.md): the model, its script grammar, and the turn a text-only step belongs to."""
