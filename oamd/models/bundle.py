"""The model ``make dist-llama MODEL=…`` puts in the self-contained executable
(``packaging/pyinstaller/oamd.spec --llama --model …``): the packaged SmolLM2 by default, else a
model pulled into the store (by name) or any GGUF file (by path). The executable's ``--model
llamacpp`` then loads it, as it loads SmolLM2 otherwise (``oamd.backends.llamacpp.packaged_model``).
"""

from __future__ import annotations

from pathlib import Path

from oamd.models.store import GGUF_HEADER_BYTES, Store, gguf_problem

__all__ = ["DEFAULT_CHOICES", "model_to_bundle"]

DEFAULT_CHOICES = ("", "llamacpp")
"""What names the packaged default (``llamacpp`` is also ``make eval``'s default ``MODEL``)."""
SPEC_PREFIX = "llamacpp:"


def model_to_bundle(choice: str, store: Store | None = None) -> Path | None:
    """The GGUF file ``choice`` names (a store name, a path, either after ``llamacpp:``), or
    ``None`` for the packaged default.

    Raises:
        ValueError: the name is not pulled, the path is missing, or it is not a GGUF file.
    """
    text = choice.strip()
    if text in DEFAULT_CHOICES or text.startswith("llamacpp?"):
        return None
    text = text.removeprefix(SPEC_PREFIX)
    path = Path(text).expanduser()
    if not path.is_file():
        store = store or Store()
        try:
            stored = store.stored(text.lower())
        except ValueError:
            stored = None
        if stored is None:
            raise ValueError(
                f"MODEL={choice}: no such file, and no model of that name in {store.folder};"
                f" pull it first: oamd models pull {text}"
            )
        path = stored.path
    with open(path, "rb") as file:
        problem = gguf_problem(file.read(GGUF_HEADER_BYTES))
    if problem is not None:
        raise ValueError(f"MODEL={choice}: {path} cannot be bundled: {problem}")
    return path
