"""The live inspector (``oamd stdio|serve --inspect 127.0.0.1:PORT``): a local web page, and the
same data as JSON under ``/api/``, showing the daemon's connections, sessions, NPCs and worlds,
each turn's model steps with the exact prompt and raw output, and a live event stream.

It sits above the protocol and beside ``oamd.serve``: it reads the rpc, agent and game objects a
connection holds and imports nothing that imports it; ``oamd.cli`` alone wires it in, and only
when ``--inspect`` is given (``tests/test_cli.py`` checks that ``oamd stdio`` never loads it
otherwise). What it records is bounded (``INSPECT_*`` in ``oamd.limits``), and nothing it does
waits for a page (``docs/INSPECTOR.md``).
"""

from oamd.inspector._inspector import Inspector, bind_loopback

__all__ = ["Inspector", "bind_loopback"]
