#!/usr/bin/env python3
"""Write a synthetic LLMServingSim-format JSONL workload (standard library only).

Poisson arrivals at --rate requests/s; prompt and output lengths drawn from lognormal
distributions shaped like ShareGPT (median prompt ~ 250, median output ~ 200 tokens);
a fraction of requests start with one of a few shared system prompts so that prefix caching
has something to hit. Deterministic for a given --seed.

    python3 scripts/gen_workload.py --num-requests 100000 --rate 20 --out /tmp/w100k.jsonl
"""

import argparse
import json
import math
import random


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-requests", type=int, required=True)
    p.add_argument("--rate", type=float, default=10.0, help="mean arrivals per second")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shared-prefix-fraction", type=float, default=0.3)
    p.add_argument("--no-token-ids", action="store_true", help="omit token ids")
    p.add_argument("--max-input", type=int, default=4096)
    p.add_argument("--max-output", type=int, default=1024)
    p.add_argument("--out", required=True)
    a = p.parse_args()

    rng = random.Random(a.seed)
    prefixes = [[rng.randrange(1, 128000) for _ in range(n)] for n in (64, 128, 256, 512)]
    t_ns = 0
    next_token = 1
    with open(a.out, "w") as f:
        for _ in range(a.num_requests):
            t_ns += int(rng.expovariate(a.rate) * 1e9)
            n_in = min(a.max_input, max(1, int(rng.lognormvariate(math.log(250), 1.0))))
            n_out = min(a.max_output, max(1, int(rng.lognormvariate(math.log(200), 0.9))))
            line = {"input_toks": n_in, "output_toks": n_out, "arrival_time_ns": t_ns}
            if not a.no_token_ids:
                ids = []
                if rng.random() < a.shared_prefix_fraction:
                    ids = list(rng.choice(prefixes)[:n_in])
                while len(ids) < n_in:
                    ids.append(next_token % 128000 + 1)
                    next_token += 1
                out = [(next_token + i) % 128000 + 1 for i in range(n_out)]
                next_token += n_out
                line["input_tok_ids"] = ids
                line["output_tok_ids"] = out
            f.write(json.dumps(line, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
