"""oamd: game engines talk to small on-device language models over one JSON-RPC protocol."""

__version__ = "0.1.0"
__all__ = ["__version__"]
