"""The ``oamd`` command line (``python -m oamd``, the ``oamd`` console script): ``main`` runs it,
``model_for`` makes the model a ``--model`` spec names as it does (``make eval`` and the benchmarks
use it). The top layer: nothing in the package imports it but ``oamd/__main__.py``."""

from oamd.cli.dispatch import main
from oamd.cli.model_spec import model_for

__all__ = ["main", "model_for"]
