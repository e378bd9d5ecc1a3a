"""Evaluators of blis-cosim policy bundles for policy-search frameworks.

A candidate policy is a policy bundle (``--policy-config`` YAML). Each evaluation runs the
``blis-cosim`` binary on a workload with ``--evaluation-json`` and reads the documented
evaluation result (``docs/src/evaluation-schema.json``, schema version 1).

- :mod:`blis_cosim_eval.openevolve`: OpenEvolve's ``evaluate(program_path)``;
- :mod:`blis_cosim_eval.gepa`: a GEPA adapter (``evaluate``, ``make_reflective_dataset``).

Neither framework is needed to import this package: their result types are used when
installed, and plain classes of the same shape otherwise.
"""

from .runner import EvaluationError, Simulation, find_binary

__all__ = ["EvaluationError", "Simulation", "find_binary"]
