"""Tests of blis_cosim_eval against the real binary ($BLIS_COSIM_BIN).

OpenEvolve and GEPA are not installed here: the classes ``EvaluationResult`` and
``EvaluationBatch`` below are stand-ins written for these tests, with the fields the
frameworks define (OpenEvolve's ``openevolve.evaluation_result.EvaluationResult(metrics,
artifacts)``, GEPA's ``gepa.core.adapter.EvaluationBatch(outputs, scores, trajectories)``).
They are registered as those modules before the package is imported, so the package uses
them as it would use the frameworks' own.
"""

import importlib
import json
import os
import subprocess
import sys
import tempfile
import types
import unittest
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = os.path.join(ROOT, "examples/policy/bursty-two-tenant.yaml")
BUNDLE = os.path.join(ROOT, "examples/policy/protect-critical.yaml")
WORKLOAD = ["--workload-spec", SPEC, "--num-requests", "60", "--slo-ttft", "500"]
WEIGHTS = "attainment=2,completion=1,jain_tokens=1"


@dataclass
class EvaluationResult:
    """Stand-in for openevolve.evaluation_result.EvaluationResult."""

    metrics: dict
    artifacts: dict = field(default_factory=dict)


@dataclass
class EvaluationBatch:
    """Stand-in for gepa.core.adapter.EvaluationBatch."""

    outputs: list
    scores: list
    trajectories: list = None


def install_stand_ins():
    """Registers the stand-ins as the frameworks' modules."""
    modules = {
        "openevolve": types.ModuleType("openevolve"),
        "openevolve.evaluation_result": types.ModuleType("openevolve.evaluation_result"),
        "gepa": types.ModuleType("gepa"),
        "gepa.core": types.ModuleType("gepa.core"),
        "gepa.core.adapter": types.ModuleType("gepa.core.adapter"),
    }
    modules["openevolve.evaluation_result"].EvaluationResult = EvaluationResult
    modules["gepa.core.adapter"].EvaluationBatch = EvaluationBatch
    sys.modules.update(modules)


install_stand_ins()
from blis_cosim_eval import gepa as gepa_adapter  # noqa: E402
from blis_cosim_eval import openevolve  # noqa: E402


def direct_evaluation(policy_path):
    """The evaluation JSON of the binary run by hand, for comparison."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "e.json")
        cmd = [os.environ["BLIS_COSIM_BIN"], *WORKLOAD, "--policy-config", policy_path]
        subprocess.run(cmd + ["--evaluation-json", out, "--fitness-weights", WEIGHTS],
                       check=True, capture_output=True)
        with open(out, encoding="utf-8") as f:
            return json.load(f)


class OpenEvolveEvaluatorTest(unittest.TestCase):
    def setUp(self):
        openevolve.configure(WORKLOAD, WEIGHTS)

    def test_evaluate_returns_a_metrics_dict_with_combined_score(self):
        metrics = openevolve.evaluate(BUNDLE)
        expected = direct_evaluation(BUNDLE)
        self.assertEqual(metrics["combined_score"], expected["fitness"]["total"])
        self.assertEqual(metrics["fitness.attainment"], expected["metrics"]["slo"]["all"]["attainment"])
        self.assertEqual(metrics["completed"], float(expected["outcomes"]["completed"]))
        self.assertEqual(metrics["anomalies.priority_inversions"], 0.0)
        self.assertTrue(all(isinstance(v, float) for v in metrics.values()))

    def test_evaluate_with_artifacts_returns_the_framework_type(self):
        result = openevolve.evaluate_with_artifacts(BUNDLE)
        self.assertIsInstance(result, EvaluationResult)
        self.assertIn("combined_score", result.metrics)
        self.assertEqual(result.artifacts["trace_summary"], "none")
        self.assertIn("fitness", result.artifacts["feedback"])
        self.assertIn("class critical:", result.artifacts["feedback"])

    def test_a_broken_candidate_scores_zero_with_the_reason(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("admission:\n  policy: no-such-policy\n")
        try:
            metrics = openevolve.evaluate(f.name)
            result = openevolve.evaluate_with_artifacts(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(metrics["combined_score"], 0.0)
        self.assertIn("no-such-policy", metrics["error"])
        self.assertEqual(result.metrics, {"combined_score": 0.0})
        self.assertIn("no-such-policy", result.artifacts["error"])


class GepaAdapterTest(unittest.TestCase):
    def setUp(self):
        self.adapter = gepa_adapter.BlisCosimAdapter(WEIGHTS)
        with open(BUNDLE, encoding="utf-8") as f:
            self.candidate = {gepa_adapter.COMPONENT: f.read()}
        self.batch = [
            {"name": "bursty", "args": WORKLOAD},
            {"name": "bursty-tight", "args": WORKLOAD[:-1] + ["100"]},
        ]

    def test_evaluate_returns_outputs_scores_and_trajectories(self):
        result = self.adapter.evaluate(self.batch, self.candidate, capture_traces=True)
        self.assertIsInstance(result, EvaluationBatch)
        self.assertEqual(len(result.outputs), 2)
        self.assertEqual(result.scores[0], direct_evaluation(BUNDLE)["fitness"]["total"])
        # A tighter TTFT target attains less.
        self.assertLess(result.outputs[1]["fitness.attainment"], result.outputs[0]["fitness.attainment"])
        self.assertEqual([t["workload"] for t in result.trajectories], ["bursty", "bursty-tight"])
        without = self.adapter.evaluate(self.batch[:1], self.candidate)
        self.assertIsNone(without.trajectories)
        self.assertEqual(without.scores, result.scores[:1])

    def test_make_reflective_dataset_is_built_from_the_evaluations(self):
        result = self.adapter.evaluate(self.batch, self.candidate, capture_traces=True)
        dataset = self.adapter.make_reflective_dataset(
            self.candidate, result, [gepa_adapter.COMPONENT]
        )
        records = dataset[gepa_adapter.COMPONENT]
        self.assertEqual(len(records), 2)
        self.assertEqual(records[1]["Inputs"]["workload"], "bursty-tight")
        self.assertIn("trace summary: none", records[0]["Feedback"])
        self.assertIn("anomalies: hol_blocking 0", records[0]["Feedback"])
        with self.assertRaises(ValueError):
            self.adapter.make_reflective_dataset(self.candidate, result, ["routing"])

    def test_a_failed_run_scores_zero(self):
        broken = {gepa_adapter.COMPONENT: "routing:\n  policy: nowhere\n"}
        result = self.adapter.evaluate(self.batch[:1], broken, capture_traces=True)
        self.assertEqual(result.scores, [0.0])
        self.assertIn("nowhere", result.outputs[0]["error"])
        records = self.adapter.make_reflective_dataset(broken, result, [gepa_adapter.COMPONENT])
        self.assertIn("the simulation failed", records[gepa_adapter.COMPONENT][0]["Feedback"])


def four_instance_cluster(directory):
    """A cluster config of four Llama-3.1-8B instances on one H100 node, written into
    ``directory``."""
    inst = {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM", "num_npus": 1,
            "tp_size": 1, "pd_type": None,
            "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}}
    node = {"num_instances": 4, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
            "instances": [inst] * 4}
    path = os.path.join(directory, "four.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"num_nodes": 1, "link_bw": 112.5, "link_latency": 0, "nodes": [node]}, f)
    return path


class RoutingWeightsTest(unittest.TestCase):
    """Issue 38: a candidate that changes only its routing weights changes the run and its
    score (the bundle carries ``routing.weights``, the seed's first search space)."""

    def test_a_candidate_changing_only_routing_weights_changes_the_score(self):
        adapter = gepa_adapter.BlisCosimAdapter(WEIGHTS)
        with tempfile.TemporaryDirectory() as tmp:
            workload = ["--workload-spec", SPEC, "--num-requests", "200", "--slo-ttft", "150",
                        "--cluster-config", four_instance_cluster(tmp)]
            batch = [{"name": "bursty-4", "args": workload}]

            def candidate(weights):
                text = "routing:\n  type: weighted\n  params:\n    weights: {%s}\n" % weights
                return {gepa_adapter.COMPONENT: text}

            spread = adapter.evaluate(batch, candidate("queue: 1, running: 1"), True)
            piled = adapter.evaluate(batch, candidate("prefix: 1"), True)
            again = adapter.evaluate(batch, candidate("queue: 1, running: 1"), True)
        for result in (spread, piled):
            self.assertNotIn("error", result.outputs[0], result.outputs[0])
        runs = [r.trajectories[0]["result"] for r in (spread, piled)]
        hashes = [r["metadata"]["policy"]["settings_sha256"] for r in runs]
        self.assertNotEqual(hashes[0], hashes[1])
        self.assertNotEqual(spread.outputs[0]["fitness.attainment"], piled.outputs[0]["fitness.attainment"])
        self.assertNotEqual(spread.scores, piled.scores)
        self.assertEqual(spread.scores, again.scores)


class WithoutFrameworksTest(unittest.TestCase):
    def test_the_package_has_its_own_types_of_the_same_shape(self):
        for name in ["openevolve", "openevolve.evaluation_result", "gepa", "gepa.core",
                     "gepa.core.adapter"]:
            sys.modules.pop(name, None)
        sys.modules["openevolve"] = None  # import fails, as when not installed
        sys.modules["gepa"] = None
        try:
            own_oe = importlib.reload(openevolve)
            own_gepa = importlib.reload(gepa_adapter)
            self.assertIsNot(own_oe.EvaluationResult, EvaluationResult)
            r = own_oe.EvaluationResult(metrics={"combined_score": 1.0}, artifacts={})
            self.assertEqual(r.metrics["combined_score"], 1.0)
            b = own_gepa.EvaluationBatch(outputs=[], scores=[], trajectories=None)
            self.assertEqual(b.scores, [])
        finally:
            del sys.modules["openevolve"], sys.modules["gepa"]
            install_stand_ins()
            importlib.reload(openevolve)
            importlib.reload(gepa_adapter)


if __name__ == "__main__":
    unittest.main()
