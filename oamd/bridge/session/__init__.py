"""``session/*``: the core's agent sessions — handlers, params, transcripts."""
