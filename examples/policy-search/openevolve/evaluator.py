"""OpenEvolve evaluation file: scores a candidate policy bundle by blis-cosim's fitness.

The workload: the bursty two-tenant spec (600 requests) on four H100s, TTFT target 300 ms;
fitness goodput=2,ttft_p99=1,jain_attainment=1. The binary comes from $BLIS_COSIM_BIN,
else target/release/blis-cosim of this checkout, else PATH.

Check a candidate without OpenEvolve: python evaluator.py initial_program.yaml
"""

import os
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))

from blis_cosim_eval import openevolve as blis  # noqa: E402

_built = os.path.join(REPO, "target", "release", "blis-cosim")
blis.configure(
    [
        "--cluster-config", os.path.join(REPO, "examples/policy-search/cluster-4xh100.json"),
        "--workload-spec", os.path.join(REPO, "examples/policy/bursty-two-tenant.yaml"),
        "--num-requests", "600",
        "--slo-ttft", "300",
    ],
    fitness_weights="goodput=2,ttft_p99=1,jain_attainment=1",
    binary=os.environ.get("BLIS_COSIM_BIN") or (_built if os.path.exists(_built) else None),
)


def evaluate(program_path):
    """OpenEvolve's entry point: metrics (combined_score = fitness) and artifacts (trace
    summary, feedback text)."""
    return blis.evaluate_with_artifacts(program_path)


if __name__ == "__main__":
    result = evaluate(sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "initial_program.yaml"))
    for name, value in sorted(result.metrics.items()):
        print(f"{name:32} {value}")
    print(result.artifacts.get("feedback") or result.artifacts.get("error"))
