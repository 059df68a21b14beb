"""Fixtures of the backend tests: a llama.cpp server process and a misbehaving HTTP server."""
