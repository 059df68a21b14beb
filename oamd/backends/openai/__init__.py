"""The OpenAI-compatible HTTP backend: the model, its wire and request body, errors and refusals, the connection pool and the spec it is started from."""
