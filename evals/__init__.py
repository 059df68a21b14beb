"""Live evals (opt-in, not CI): the sibling project's tool-choice scenarios played through the
bridge protocol against any ``--model`` spec; ``make eval`` or ``python -m evals``."""
