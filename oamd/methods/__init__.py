"""Thin adapters, one module per namespace: parse params, call the domain, shape the result."""
