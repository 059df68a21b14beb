"""The wire side of the adapters: params read into typed values, typed values written back.

``params`` has the accessors every parser uses (errors worded as the reference bridge words them,
in its order); each other module reads one part of the protocol into the dataclasses ``agent/``
and ``game/`` take (``SessionOptions``, ``ToolDefinition``, ``Persona``, ``NpcOptions``…) and
writes their wire forms. Nothing below ``methods/`` sees a params key.
"""

__all__: list[str] = []
