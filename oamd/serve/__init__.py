"""``oamd serve``: the protocol for many clients at once on sockets (``server``), sharing the model
backends fairly among them (``fair``). Loaded only by ``oamd serve``."""

from oamd.serve.server import EndpointError, ServeOptions, Server, serve

__all__ = ["EndpointError", "ServeOptions", "Server", "serve"]
