"""The local model store: GGUF files ``oamd models pull`` downloads and ``--model llamacpp:NAME``
loads, plus the lookups that find models other tools already downloaded (Ollama's blobs, the
Hugging Face hub cache) without copying them.

``catalog`` lists the known-good models by name, ``store`` owns the store folder and its files,
``download`` fetches into it (resumable, locked, verified) and ``resolve`` turns a name into a
file, or into the reason there is none yet. The package imports nothing of the daemon's but
``oamd.log``: the llama.cpp backend never imports it (``oamd.cli`` hands it the lookup), so
``oamd stdio`` without a named model never loads it.
"""
