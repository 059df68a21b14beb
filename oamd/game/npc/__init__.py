"""NPCs (§6): ``npc`` (the ``Npc``, its tool names, the ``NpcStore``), ``persona`` (persona,
options, memory), ``prompt`` (the system text), ``tools`` (memory and world tools), ``talk``
(the dialogue turn as a service), ``ports`` (its seams), ``turns`` (the setup talk shares, bark,
the prefills, compaction), ``reply`` (a talk turn's reply on a full-size model: formats, fallbacks,
``LineTracker``), ``small_reply`` (the same on a small model) and ``line_guard`` (what a small
model's line may not be)."""

__all__: list[str] = []
