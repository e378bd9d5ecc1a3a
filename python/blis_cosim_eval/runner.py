"""Runs blis-cosim on one policy bundle and returns its evaluation result."""

import json
import os
import shutil
import subprocess
import tempfile

#: The evaluation schema version this package reads.
SCHEMA_VERSION = 2

#: Environment variable naming the blis-cosim binary.
BINARY_ENV = "BLIS_COSIM_BIN"


class EvaluationError(RuntimeError):
    """A simulation that failed or wrote an evaluation this package cannot read."""


def find_binary(binary=None):
    """The blis-cosim binary: ``binary`` if given, else $BLIS_COSIM_BIN, else on PATH."""
    path = binary or os.environ.get(BINARY_ENV) or shutil.which("blis-cosim")
    if not path:
        raise EvaluationError(
            f"blis-cosim not found: pass binary=, set ${BINARY_ENV}, or put it on PATH"
        )
    return path


class Simulation:
    """How to evaluate a policy bundle: the binary, the workload arguments (for example
    ``["--workload-spec", "w.yaml", "--slo-ttft", "500"]``), the fitness weights
    (``--fitness-weights``; ``None``: the simulator's default) and a time limit, s."""

    def __init__(self, workload_args, fitness_weights=None, binary=None, timeout_s=600):
        self.workload_args = list(workload_args)
        self.fitness_weights = fitness_weights
        self.binary = find_binary(binary)
        self.timeout_s = timeout_s

    def command(self, policy_path, evaluation_path, extra_args=()):
        """The command line evaluating the bundle at ``policy_path``."""
        cmd = [self.binary, *self.workload_args, *extra_args]
        cmd += ["--policy-config", str(policy_path), "--evaluation-json", str(evaluation_path)]
        if self.fitness_weights:
            cmd += ["--fitness-weights", self.fitness_weights]
        return cmd

    def evaluate_file(self, policy_path, extra_args=()):
        """The evaluation result (a dict) of the bundle at ``policy_path``; raises
        :class:`EvaluationError` with the simulator's message when the run fails."""
        with tempfile.TemporaryDirectory(prefix="blis-cosim-eval-") as tmp:
            out = os.path.join(tmp, "evaluation.json")
            cmd = self.command(policy_path, out, extra_args)
            try:
                done = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=self.timeout_s, check=False
                )
            except subprocess.TimeoutExpired as e:
                raise EvaluationError(f"blis-cosim ran past {self.timeout_s} s") from e
            if done.returncode != 0:
                raise EvaluationError(done.stderr.strip() or f"exit status {done.returncode}")
            with open(out, encoding="utf-8") as f:
                result = json.load(f)
        version = result.get("schema_version")
        if version != SCHEMA_VERSION:
            raise EvaluationError(f"evaluation schema version {version}, expected {SCHEMA_VERSION}")
        return result

    def evaluate_text(self, policy_yaml, extra_args=()):
        """The evaluation result of a bundle given as YAML text."""
        with tempfile.TemporaryDirectory(prefix="blis-cosim-policy-") as tmp:
            path = os.path.join(tmp, "policy.yaml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(policy_yaml)
            return self.evaluate_file(path, extra_args)


def metrics_of(result):
    """A flat dict of numbers from an evaluation result: ``combined_score`` (the fitness),
    each fitness term's normalised value (``fitness.<metric>``), headline raw metrics and
    the anomaly counters."""
    slo = result["metrics"]["slo"]
    overall = slo["all"]
    metrics = {"combined_score": float(result["fitness"]["total"])}
    for name, term in sorted(result["fitness"]["terms"].items()):
        metrics[f"fitness.{name}"] = float(term["value"])
    metrics.update(
        {
            "completed": float(result["outcomes"]["completed"]),
            "rejected": float(result["outcomes"]["rejected"]),
            "shed": float(result["outcomes"]["shed"]),
            "expired": float(result["outcomes"]["expired"]),
            "ttft_p99_ms": float(overall["ttft_ms"]["p99"]),
            "e2e_p99_ms": float(overall["e2e_ms"]["p99"]),
            "jain_fairness_tokens": float(slo["jain_fairness_tokens"]),
        }
    )
    if overall["attainment"] is not None:
        metrics["attainment"] = float(overall["attainment"])
    for name, count in sorted(result["anomalies"].items()):
        metrics[f"anomalies.{name}"] = float(count)
    return metrics


def feedback_of(result):
    """A short text explaining an evaluation: fitness terms, outcomes, per-class results,
    anomalies and the trace summary, for a reflecting language model."""
    lines = [f"fitness {result['fitness']['total']:.4f}"]
    for name, term in sorted(result["fitness"]["terms"].items()):
        lines.append(f"  {name}: value {term['value']:.4f}, weight {term['weight']}")
    o = result["outcomes"]
    lines.append(
        f"requests {o['requests']}: completed {o['completed']}, rejected {o['rejected']}, "
        f"shed {o['shed']}, expired {o['expired']}"
    )
    for r in o["reasons"]:
        lines.append(f"  {r['count']} {r['outcome']} at {r['stage']} ({r['policy']})")
    for name, g in sorted(result["metrics"]["slo"]["by_slo_class"].items()):
        attained = "-" if g["attainment"] is None else f"{100 * g['attainment']:.1f}%"
        lines.append(
            f"class {name}: {g['completed']} done, TTFT p99 {g['ttft_ms']['p99']:.1f} ms, "
            f"E2E p99 {g['e2e_ms']['p99']:.1f} ms, attained {attained}"
        )
    anomalies = ", ".join(f"{k} {v}" for k, v in sorted(result["anomalies"].items()))
    lines.append(f"anomalies: {anomalies}")
    summary = result.get("trace_summary")
    lines.append("trace summary: " + (json.dumps(summary, sort_keys=True) if summary else "none"))
    return "\n".join(lines)
