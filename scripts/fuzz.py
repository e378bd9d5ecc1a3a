#!/usr/bin/env python3
"""Mutation fuzzer for blis-cosim's inputs (driven by scripts/fuzz.sh).

For MINUTES per input kind, mutates a valid input (the bundled examples, a cluster config,
a profile bundle), runs the release binary on it under a timeout and an address-space limit,
and reports panics (exit 101 or 'panicked' in stderr), hangs (20 s of CPU time, or 180 s of
wall time for a run that blocks), memory outliers (peak
RSS above 2 GB, or killed at the address-space limit) and any other exit but 0 or 1. The
`stream` kind also runs each mutant held whole, and the `spec` kind on one thread as well as
two, and reports any difference in exit status or request CSV (a mismatch). The offending inputs are kept under OUT/<kind>/. Standard library
only.
"""

import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIMEOUT_S = 20  # CPU seconds a run may use: more is a hang (it spins)
WALL_TIMEOUT_S = 180  # wall seconds: more is a hang too (it blocks); generous, as under
# `nice -n 19` on a loaded machine a 0.3 s run can take 20 s of wall time
RSS_LIMIT = 2 << 30  # an outlier above this
AS_LIMIT = 8 << 30  # address space the binary may map
EDGE = [b"0", b"-1", b"1e30", b"-1e30", b"1e-12", b"4000000000", b"18446744073709551615",
        b"18446744073709551616", b"9223372036854775807", b"1000000000000000001", b"0.5",
        b"null", b'"x"', b"[]", b"{}", b"nan", b"1e308"]
REQUEST = b'{"input_toks":30,"output_toks":4,"arrival_time_ns":0}\n'


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four edits: an edge value for a number, a deleted span, an inserted, flipped
    or duplicated byte, a duplicated or dropped line."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not b:
            break
        at = rng.randrange(len(b))
        kind = rng.randrange(7)
        if kind == 0:
            start = next((i for i in range(at, len(b)) if chr(b[i]).isdigit()), None)
            if start is not None:
                end = start
                while end < len(b) and (chr(b[end]).isdigit() or b[end] in b".e-+"):
                    end += 1
                b[start:end] = rng.choice(EDGE)
        elif kind == 1:
            del b[at:at + rng.randint(1, 32)]
        elif kind == 2:
            b.insert(at, rng.randrange(256))
        elif kind == 3:
            b[at] ^= 1 << rng.randrange(8)
        elif kind == 4:
            b.insert(at, b[at])
        else:
            start = b.rfind(b"\n", 0, at) + 1
            end = b.find(b"\n", at)
            end = len(b) if end < 0 else end + 1
            line = bytes(b[start:end])
            b[start:end] = line * 2 if kind == 5 else b""
    return bytes(b)


def mutate_json(data: bytes, rng: random.Random) -> bytes:
    """Replaces one to three values of a JSON document by edge values (half the time), else
    mutates its text."""
    if rng.random() < 0.5:
        return mutate(data, rng)
    doc = json.loads(data)
    for _ in range(rng.randint(1, 3)):
        slots = []

        def walk(v):
            items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else []
            for k, c in items:
                slots.append((v, k))
                walk(c)
        walk(doc)
        parent, key = rng.choice(slots)
        parent[key] = json.loads(rng.choice(EDGE).replace(b"nan", b"1e400").decode())
    return json.dumps(doc).encode()


class Kind:
    """An input kind: its base files, how to mutate one and the command that reads it. With
    a `twin` (a command that must give the same exit status and output: `command(p, out)` and
    `twin(p, out)` write the request CSV to `out`), each run also picks one of `flags` for
    both, and any difference is a finding ('mismatch')."""

    def __init__(self, name, bases, command, mutator=mutate, in_place=False, twin=None,
                 flags=([],)):
        self.name, self.bases, self.command, self.mutator = name, bases, command, mutator
        self.in_place, self.twin, self.flags = in_place, twin, flags


def run_one(cmd, cwd):
    """Runs `cmd` with limits; returns (exit code or 'timeout', peak RSS bytes, stderr)."""
    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (TIMEOUT_S, TIMEOUT_S + 1))
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=limits)
    try:
        _, err = proc.communicate(timeout=WALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return "timeout", 0, b""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode == -signal.SIGXCPU:
        return "timeout", usage.ru_maxrss * 1024, err
    return proc.returncode, usage.ru_maxrss * 1024, err


def verdict(code, rss, err):
    """'panic', 'hang', 'memory', 'crash' or None (a clean acceptance or refusal)."""
    if code == "timeout":
        return "hang"
    if code == 101 or b"panicked" in err:
        return "panic"
    if rss > RSS_LIMIT or b"memory allocation" in err:
        return "memory"
    if code not in (0, 1):
        return "crash"
    return None


def twin_verdict(kind, target, work, flags, first):
    """'mismatch' when the twin command's exit status or request CSV differs from the
    command's (its exit status `first`, its CSV in `work`/twin-a.csv), else None; the twin's
    own verdict if it has one."""
    a, b = work / "twin-a.csv", work / "twin-b.csv"
    b.unlink(missing_ok=True)
    code_b, rss, err = run_measured(kind.twin(target, b) + flags, work)
    v = verdict(code_b, rss, err)
    if v:
        return v, err
    if first != code_b:
        return "mismatch", f"exit {first} against {code_b} ({' '.join(flags)})".encode()
    if first == 0 and a.read_bytes() != b.read_bytes():
        return "mismatch", f"request CSVs differ ({' '.join(flags)})".encode()
    return None, b""


def fuzz(kind, minutes, work, out, rng):
    """Fuzzes `kind` for `minutes`; returns counts by verdict."""
    counts = {"runs": 0, "accepted": 0, "panic": 0, "hang": 0, "memory": 0, "crash": 0,
              "mismatch": 0}
    peak = 0
    deadline = time.monotonic() + 60 * minutes
    keep = out / kind.name
    while time.monotonic() < deadline:
        base = rng.choice(kind.bases)
        mutant = kind.mutator(base.read_bytes(), rng)
        # A profile file is mutated in place (the binary reads the whole bundle); the others
        # are written beside their base.
        target = base if kind.in_place else work / kind.name / base.name
        target.parent.mkdir(parents=True, exist_ok=True)
        original = base.read_bytes()
        target.write_bytes(mutant)
        # Each run starts a fresh process, so RUSAGE_CHILDREN's peak is the largest so far:
        # measure through a wrapper instead (the child's own rusage).
        flags = list(rng.choice(kind.flags))
        if kind.twin:
            (work / "twin-a.csv").unlink(missing_ok=True)
            code, rss, err = run_measured(kind.command(target, work / "twin-a.csv") + flags, work)
        else:
            code, rss, err = run_measured(kind.command(target), work)
        v = verdict(code, rss, err)
        if not v and kind.twin:
            v, err = twin_verdict(kind, target, work, flags, code)
        target.write_bytes(original)
        counts["runs"] += 1
        counts["accepted"] += code == 0
        peak = max(peak, rss)
        if v:
            counts[v] += 1
            keep.mkdir(parents=True, exist_ok=True)
            n = counts[v]
            (keep / f"{v}-{n}-{base.name}").write_bytes(mutant)
            (keep / f"{v}-{n}-{base.name}.stderr").write_bytes(err[-4000:])
    counts["peak_rss_mb"] = peak >> 20
    return counts


def run_measured(cmd, cwd):
    """run_one in a forked helper so that its RUSAGE_CHILDREN peak is this run's alone."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            code, rss, err = run_one(cmd, cwd)
        except OSError as e:
            code, rss, err = f"cannot run: {e}", 0, f"cannot run: {e}".encode()
        os.write(w, json.dumps([code, rss, err[-4000:].decode("utf-8", "replace")]).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    code, rss, err = json.loads(data)
    return code, rss, err.encode()


def real_run(binary, example, work):
    """A real vLLM run's first 40 requests (`requests.jsonl` and `meta.json` of one of
    `../shared`'s bench runs, `example`) under `work`/run, the dataset they replayed, and a
    simulation of it (request CSV and summary JSON): the files `validate` and `calibrate`
    read. Returns (run folder, dataset, request CSV, summary JSON)."""
    run = work / "run"
    run.mkdir(exist_ok=True)
    lines = (example / "vllm/requests.jsonl").read_text().splitlines()[:40]
    (run / "requests.jsonl").write_text("\n".join(lines) + "\n")
    shutil.copy(example / "vllm/meta.json", run / "meta.json")
    first = json.loads(lines[0])["arrival_time"]
    dataset = work / "replayed.jsonl"
    with open(dataset, "w") as f:
        for line in lines:
            r = json.loads(line)
            f.write(json.dumps({"input_toks": r["input_toks"], "output_toks": r["output_toks"],
                                "arrival_time_ns": int((r["arrival_time"] - first) * 1e9)}) + "\n")
    csv, summary = work / "simulated.csv", work / "simulated.json"
    subprocess.run([str(binary), "--dataset", str(dataset), "--cluster-config",
                    str(example / "config.json"), "--output", str(csv), "--summary-json",
                    str(summary)], check=True, capture_output=True)
    return run, dataset, csv, summary


def kinds(binary, repo, work, perf, traces, bench, clusters):
    """The input kinds: jsonl, stream, spec, cluster, policy, sweep, hardware, model, profile,
    trace, validate, calibrate."""
    w = work / "one.jsonl"
    w.write_bytes(REQUEST * 3)
    cluster = work / "cluster.json"
    instance = {"model_name": "meta-llama/Llama-3.1-8B", "hardware": "H100-SXM",
                "pd_type": None, "tp_size": 1,
                "npu_mem": {"mem_size": 80, "mem_bw": 3350, "mem_latency": 0}}
    node = {"num_instances": 2, "cpu_mem": {"mem_size": 512, "mem_bw": 256, "mem_latency": 0},
            "instances": [instance, instance]}
    cluster.write_text(json.dumps({"num_nodes": 2, "link_bw": 16, "link_latency": 0,
                                   "nodes": [node, node]}, indent=1))
    sample = work / "sample.jsonl"
    sample.write_bytes(b"".join((repo / "examples/sample.jsonl").read_bytes()
                                .splitlines(keepends=True)[:50]))
    b = str(binary)
    # Agentic sessions (a ReAct loop's), as `generate` writes them.
    agentic = work / "agentic.jsonl"
    subprocess.run([b, "generate", "--scenario", "react-search", "--num-requests", "12",
                    "--output", str(agentic)], check=True, capture_output=True)
    result = [
        Kind("jsonl", [sample, agentic], lambda p: [b, "--dataset", str(p)]),
        # The same, read as the run goes (as a dataset above --dataset-memory is), on a second
        # thread; its twin holds the file whole, and both must give the same request CSV,
        # under each replay mode.
        Kind("stream", [sample, agentic],
             lambda p, out: [b, "--dataset", str(p), "--dataset-memory", "0", "--threads", "2",
                             "--output", str(out)],
             twin=lambda p, out: [b, "--dataset", str(p), "--threads", "1", "--output", str(out)],
             flags=([], ["--arrival-speedup", "2"], ["--max-in-flight", "5"], ["--num-reqs", "7"],
                    ["--request-routing-policy", "round-robin"],
                    # a control plane that drops requests (sessions cancelled on the way)
                    ["--policy-config", str(repo / "examples/policy/protect-critical.yaml")],
                    ["--cluster-config", str(repo / "examples/policy-search/cluster-4xh100.json")],
                    # a prefill and a decode instance, under vLLM's and LMCache's P/D flows
                    ["--pd", "1:1"], ["--pd", "1:1", "--pd-flow", "lmcache"])),
        # Drawn on a second thread and on one: the same request CSV.
        Kind("spec", sorted((repo / "examples/scenarios").glob("*.yaml")),
             lambda p, out: [b, "--workload-spec", str(p), "--max-requests", "20000",
                             "--threads", "2", "--output", str(out)],
             twin=lambda p, out: [b, "--workload-spec", str(p), "--max-requests", "20000",
                                  "--threads", "1", "--output", str(out)]),
        # The 4-instance config, and LLMServingSim's cluster configs where ../shared holds
        # them (DP, EP, PP, P/D, CXL, PIM, power; a PIM config's INI files are not beside the
        # mutant, so it is refused).
        Kind("cluster", [cluster] + clusters,
             lambda p: [b, "--cluster-config", str(p), "--dataset", str(w)], mutate_json),
        # The bundled policy bundles, behind the control plane's worked example on four
        # instances.
        Kind("policy", sorted((repo / "examples/policy").glob("*.yaml")),
             lambda p: [b, "--workload-spec", str(repo / "examples/policy/bursty-two-tenant.yaml"),
                        "--max-requests", "2000", "--cluster-config",
                        str(repo / "examples/policy-search/cluster-4xh100.json"),
                        "--policy-config", str(p)]),
        # The bundled sweep specs, parsed and expanded into their points (none run).
        Kind("sweep", sorted((repo / "examples/sweeps").glob("*.yaml")),
             lambda p: [b, "sweep", "--space", str(p), "--list-points"]),
        # The bundled hardware files (at TP 2: the link's fields are read too) and model
        # configs (at TP 4, where each of them fits an H100), given as paths.
        Kind("hardware", sorted((repo / "hardware").glob("*.toml")),
             lambda p: [b, "--dataset", str(w), "--hardware", str(p), "--tp", "2"]),
        Kind("model", sorted((repo / "model_archs").glob("*/*.json")),
             lambda p: [b, "--dataset", str(w), "--model", str(p), "--tp", "4"], mutate_json),
    ]
    # A sweep spec names its cluster config beside it.
    (work / "sweep").mkdir(exist_ok=True)
    shutil.copy(repo / "examples/sweeps/cluster-h100.json", work / "sweep")
    if perf:
        bundle = work / "perf/RTX4090/meta-llama/Llama-3.1-8B/bf16"
        shutil.copytree(perf / "RTX4090/meta-llama/Llama-3.1-8B/bf16", bundle)
        files = [bundle / "meta.yaml"] + sorted((bundle / "tp1").glob("*.csv"))
        result.append(Kind("profile", files, lambda p: [
            b, "--dataset", str(w), "--profile-dir", str(work / "perf"), "--hardware", "RTX4090"], in_place=True))
    if traces:
        # The production traces' first 60 lines (Azure's CSV, Mooncake's JSONL), read as the
        # run goes against held whole, as the `stream` kind.
        bases = []
        for name in ("azure-llm-2023-code.csv", "azure-llm-2023-conv.csv",
                     "mooncake-conversation.jsonl", "mooncake-synthetic.jsonl"):
            base = work / f"trace-{name}"
            base.write_bytes(b"".join((traces / name).read_bytes().splitlines(keepends=True)[:60]))
            bases.append(base)
        result.append(Kind(
            "trace", bases,
            lambda p, out: [b, "--dataset", str(p), "--dataset-memory", "0", "--threads", "2",
                            "--output", str(out)],
            twin=lambda p, out: [b, "--dataset", str(p), "--threads", "1", "--output", str(out)],
            flags=([], ["--num-instances", "2", "--request-routing-policy", "round-robin"],
                   ["--trace-block-size", "16", "--enable-prefix-caching"], ["--pd", "1:1"])))
    if bench:
        # A real run's two files, mutated in place, as `validate` reads them beside a
        # simulation of the run (its request CSV and summary), and as `calibrate` fits them.
        run, dataset, csv, summary = real_run(binary, bench, work)
        files = [run / "requests.jsonl", run / "meta.json"]
        result.append(Kind("validate", files + [csv, summary], lambda p: [
            b, "validate", "--vllm", str(run / "requests.jsonl"), "--sim", str(csv),
            "--sim-summary", str(summary)], in_place=True))
        result.append(Kind("calibrate", files, lambda p: [
            b, "calibrate", "--vllm", str(run / "requests.jsonl"), "--dataset", str(dataset),
            "--cluster-config", str(bench / "config.json"), "--output",
            str(work / "calibrated.toml")], in_place=True))
    return result


def main():
    binary, repo, minutes, which, out = sys.argv[1:6]
    binary, repo, out = Path(binary).resolve(), Path(repo).resolve(), Path(out).resolve()
    perf = repo.parent / "shared/data/llmservingsim/profiler/perf"
    perf = perf if perf.is_dir() else None
    bench = repo.parent / "shared/data/llmservingsim/bench/examples/RTX4090/Llama-3.1-8B"
    bench = bench if (bench / "vllm/requests.jsonl").is_file() else None
    traces = repo.parent / "shared/data/traces"
    traces = traces if (traces / "mooncake-synthetic.jsonl").is_file() else None
    clusters = sorted((repo.parent / "shared/data/llmservingsim/configs/cluster").glob("*.json"))
    rng = random.Random(int(os.environ.get("FUZZ_SEED", "1")))
    total_bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for kind in kinds(binary, repo, work, perf, traces, bench, clusters):
            if which not in ("all", kind.name):
                continue
            counts = fuzz(kind, float(minutes), work, out, rng)
            bad = sum(counts[k] for k in ("panic", "hang", "memory", "crash", "mismatch"))
            total_bad += bad
            print(f"{kind.name:8} runs {counts['runs']:6} (accepted {counts['accepted']:5})  panics {counts['panic']}  hangs "
                  f"{counts['hang']}  memory>2GB {counts['memory']}  other crashes "
                  f"{counts['crash']}  mismatches {counts['mismatch']}  peak RSS {counts['peak_rss_mb']} MB", flush=True)
        if perf is None and which in ("all", "profile"):
            print("profile  skipped: no ../shared/data/llmservingsim/profiler/perf")
        if traces is None and which in ("all", "trace"):
            print("trace    skipped: no ../shared/data/traces")
        for name in ("validate", "calibrate"):
            if bench is None and which in ("all", name):
                print(f"{name:8} skipped: no ../shared/data/llmservingsim/bench/examples "
                      "(a real run)")
    if total_bad:
        print(f"findings kept under {out}")
    sys.exit(1 if total_bad else 0)


if __name__ == "__main__":
    main()
