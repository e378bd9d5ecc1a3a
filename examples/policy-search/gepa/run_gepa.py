"""GEPA over blis-cosim policy bundles: the candidate's one component, policy_bundle, is a
bundle's YAML; each workload of the training set scores it by its fitness.

  python run_gepa.py --check         # evaluate the seed once, print scores and feedback
  python run_gepa.py --reflection-lm openai/gpt-4o --budget 60    # needs `pip install gepa`

The binary comes from $BLIS_COSIM_BIN, else target/release/blis-cosim, else PATH.
"""

import argparse
import os
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))

from blis_cosim_eval.gepa import COMPONENT, BlisCosimAdapter  # noqa: E402

CLUSTER = os.path.join(REPO, "examples/policy-search/cluster-4xh100.json")
SPEC = os.path.join(REPO, "examples/policy/bursty-two-tenant.yaml")
WORKLOADS = [
    {"name": f"bursty-ttft-{ttft}", "args": ["--cluster-config", CLUSTER, "--workload-spec", SPEC,
                                           "--num-requests", "600", "--slo-ttft", str(ttft)]}
    for ttft in (200, 300, 500)
]
WEIGHTS = "goodput=2,ttft_p99=1,jain_attainment=1"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="evaluate the seed only")
    parser.add_argument("--reflection-lm", help="GEPA's reflection model")
    parser.add_argument("--budget", type=int, default=60, help="GEPA's max_metric_calls")
    args = parser.parse_args()
    built = os.path.join(REPO, "target", "release", "blis-cosim")
    binary = os.environ.get("BLIS_COSIM_BIN") or (built if os.path.exists(built) else None)
    adapter = BlisCosimAdapter(WEIGHTS, binary=binary)
    seed_path = os.path.join(REPO, "examples/policy-search/openevolve/initial_program.yaml")
    with open(seed_path, encoding="utf-8") as f:
        seed = {COMPONENT: f.read()}
    if args.check:
        batch = adapter.evaluate(WORKLOADS, seed, capture_traces=True)
        dataset = adapter.make_reflective_dataset(seed, batch, [COMPONENT])
        for workload, score, record in zip(WORKLOADS, batch.scores, dataset[COMPONENT]):
            print(f"== {workload['name']}: fitness {score:.4f}\n{record['Feedback']}\n")
        return
    import gepa  # only for the search itself

    result = gepa.optimize(
        seed_candidate=seed,
        trainset=WORKLOADS,
        valset=WORKLOADS,
        adapter=adapter,
        reflection_lm=args.reflection_lm,
        max_metric_calls=args.budget,
    )
    print(result.best_candidate[COMPONENT])


if __name__ == "__main__":
    main()
