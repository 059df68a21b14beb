"""The bridge layer: the protocol's methods as thin adapters over ``agent/`` and ``game/``.

A core (``core``: initialize, ping, availability, shutdown; ``validate``; ``session/``) and the
game extension (``game/``: npc, world, decision, content), listed in ``extensions`` and loaded
namespace by namespace on first use. Each namespace reads its params into the typed values below
it (its ``params`` module, on the accessors of ``params``) and writes its wire shapes in one place
(``encode`` for the agent's objects, the namespace's ``encode`` for its own). Nothing below
``bridge/`` sees a params key or builds a wire dict.
"""
