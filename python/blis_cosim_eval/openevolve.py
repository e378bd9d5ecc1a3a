"""An OpenEvolve evaluator whose candidate program is a blis-cosim policy bundle (YAML).

OpenEvolve calls ``evaluate(program_path)`` of its evaluation file. Configure the workload
with :func:`configure` (or the environment: ``BLIS_COSIM_EVAL_ARGS``, the workload arguments
as one shell-quoted string, and ``BLIS_COSIM_FITNESS_WEIGHTS``), then either return

- :func:`evaluate`: a metrics dict with ``combined_score`` (the fitness), or
- :func:`evaluate_with_artifacts`: an ``EvaluationResult(metrics, artifacts)`` whose
  artifacts hold the trace summary and the feedback text.

A failed simulation scores ``combined_score`` 0 with the simulator's message under
``error`` (OpenEvolve's convention), so that a broken candidate ranks last.
"""

import json
import os
import shlex
from dataclasses import dataclass, field

from .runner import EvaluationError, Simulation, feedback_of, metrics_of

try:  # OpenEvolve's own type when installed.
    from openevolve.evaluation_result import EvaluationResult
except ImportError:  # pragma: no cover - exercised when OpenEvolve is absent

    @dataclass
    class EvaluationResult:
        """The shape of OpenEvolve's ``EvaluationResult``."""

        metrics: dict
        artifacts: dict = field(default_factory=dict)


_simulation = None


def configure(workload_args, fitness_weights=None, binary=None, timeout_s=600):
    """Sets the simulation every later :func:`evaluate` runs."""
    global _simulation
    _simulation = Simulation(workload_args, fitness_weights, binary, timeout_s)
    return _simulation


def _configured():
    if _simulation is None:
        args = os.environ.get("BLIS_COSIM_EVAL_ARGS")
        if not args:
            raise EvaluationError(
                "no workload: call blis_cosim_eval.openevolve.configure(...) or set "
                "BLIS_COSIM_EVAL_ARGS"
            )
        configure(shlex.split(args), os.environ.get("BLIS_COSIM_FITNESS_WEIGHTS"))
    return _simulation


def evaluate(program_path):
    """OpenEvolve's evaluator: the metrics dict of the policy bundle at ``program_path``."""
    try:
        return metrics_of(_configured().evaluate_file(program_path))
    except (EvaluationError, OSError, ValueError, KeyError) as e:
        return {"combined_score": 0.0, "error": str(e)}


def evaluate_with_artifacts(program_path):
    """The same as an ``EvaluationResult``; artifacts: ``trace_summary`` (JSON text or
    ``none``), ``feedback`` (text), or ``error`` for a failed simulation."""
    try:
        result = _configured().evaluate_file(program_path)
    except (EvaluationError, OSError, ValueError, KeyError) as e:
        return EvaluationResult(metrics={"combined_score": 0.0}, artifacts={"error": str(e)})
    summary = result.get("trace_summary")
    artifacts = {
        "trace_summary": json.dumps(summary, sort_keys=True) if summary else "none",
        "feedback": feedback_of(result),
    }
    return EvaluationResult(metrics=metrics_of(result), artifacts=artifacts)
