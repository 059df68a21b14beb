"""The domain of a turn: models by spec, sessions, the two tool loops, schemas, transcripts."""
