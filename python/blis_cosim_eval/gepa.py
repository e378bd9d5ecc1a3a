"""A GEPA adapter whose candidate is a blis-cosim policy bundle.

A candidate is GEPA's ``dict[str, str]``: the bundle's YAML under ``policy_bundle``
(:data:`COMPONENT`). A batch is a list of workloads, each a dict with ``name`` and ``args``
(the workload arguments of the binary, e.g. ``["--scenario", "mixed-slo", "--slo-ttft",
"300"]``); a workload's score is its fitness.
"""

from dataclasses import dataclass

from .runner import EvaluationError, Simulation, feedback_of, metrics_of

#: The candidate's component: the policy bundle YAML.
COMPONENT = "policy_bundle"

try:  # GEPA's own type when installed.
    from gepa.core.adapter import EvaluationBatch
except ImportError:  # pragma: no cover - exercised when GEPA is absent

    @dataclass
    class EvaluationBatch:
        """The shape of GEPA's ``EvaluationBatch``."""

        outputs: list
        scores: list
        trajectories: list = None


class BlisCosimAdapter:
    """GEPA's adapter protocol over blis-cosim: ``evaluate`` and ``make_reflective_dataset``.
    ``fitness_weights`` is ``--fitness-weights`` (``None``: the simulator's default)."""

    def __init__(self, fitness_weights=None, binary=None, timeout_s=600):
        self.fitness_weights = fitness_weights
        self.binary = binary
        self.timeout_s = timeout_s

    def _run(self, workload, policy_yaml):
        simulation = Simulation(workload["args"], self.fitness_weights, self.binary, self.timeout_s)
        return simulation.evaluate_text(policy_yaml)

    def evaluate(self, batch, candidate, capture_traces=False):
        """Runs the candidate on every workload of ``batch``: outputs are the metrics dicts
        (or ``{"error": ...}``), scores the fitnesses (0 for a failed run), trajectories
        (with ``capture_traces``) the evaluation results, feedback text included."""
        outputs, scores, trajectories = [], [], []
        for workload in batch:
            try:
                result = self._run(workload, candidate[COMPONENT])
            except EvaluationError as e:
                outputs.append({"error": str(e)})
                scores.append(0.0)
                trajectories.append({"workload": workload.get("name"), "error": str(e)})
                continue
            metrics = metrics_of(result)
            outputs.append(metrics)
            scores.append(metrics["combined_score"])
            trajectories.append(
                {"workload": workload.get("name"), "result": result, "feedback": feedback_of(result)}
            )
        return EvaluationBatch(
            outputs=outputs, scores=scores, trajectories=trajectories if capture_traces else None
        )

    def make_reflective_dataset(self, candidate, eval_batch, components_to_update):
        """For each component to update, one record per workload: the bundle it ran, the
        score, and feedback built from the evaluation (fitness terms, outcomes, per-class
        results, anomalies, trace summary)."""
        if eval_batch.trajectories is None:
            raise ValueError("make_reflective_dataset needs evaluate(..., capture_traces=True)")
        unknown = [c for c in components_to_update if c != COMPONENT]
        if unknown:
            raise ValueError(f"unknown components {unknown}: the candidate has only {COMPONENT}")
        records = []
        for trajectory, score in zip(eval_batch.trajectories, eval_batch.scores):
            feedback = trajectory.get("feedback") or f"the simulation failed: {trajectory['error']}"
            records.append(
                {
                    "Inputs": {"workload": trajectory["workload"], COMPONENT: candidate[COMPONENT]},
                    "Generated Outputs": f"fitness {score:.4f}",
                    "Feedback": feedback,
                }
            )
        return {c: records for c in components_to_update}
