"""Driver: `blis-cosim-ray --space s.yaml --out DIR [--address ADDR] [--chunk N]`.

Every Ray task runs `blis-cosim sweep --space SPEC --out TMP --only-points IDS --jobs 1` on
its node (the binary and every path the spec names must exist there: install the binary on
each node, keep the spec and its data on a shared file system) and sends back the rows,
timings, summaries and cluster configs it wrote. The driver merges them into DIR and lets
`blis-cosim sweep --report DIR` sort, annotate and draw, exactly as a local sweep ends.
"""

import argparse
import csv
import io
import os
import subprocess
import sys
import tempfile

import ray


def _finished(results_path):
    """Rows of points already finished (status ok) in an earlier run, and the header."""
    if not os.path.exists(results_path):
        return None, {}
    with open(results_path, newline="") as f:
        data = f.read()
    data = data[: data.rfind("\n") + 1]
    reader = csv.reader(io.StringIO(data))
    header = next(reader, None)
    if header is None:
        return None, {}
    keep = [i for i, h in enumerate(header) if h not in ("pareto", "meets_slo")]
    status = header.index("status")
    rows = {}
    for row in reader:
        if len(row) == len(header) and row[status] == "ok":
            rows[int(row[0])] = [row[i] for i in keep]
    return [header[i] for i in keep], rows


@ray.remote(num_cpus=1)
def run_chunk(binary, space, ids):
    """Runs the points `ids` in a temporary folder; returns what they wrote."""
    with tempfile.TemporaryDirectory(prefix="blis-cosim-ray-") as out:
        only = ",".join(str(i) for i in ids)
        proc = subprocess.run(
            [binary, "sweep", "--space", space, "--out", out, "--only-points", only, "--jobs", "1"],
            capture_output=True,
            text=True,
        )
        results = os.path.join(out, "results.csv")
        if not os.path.exists(results):
            raise RuntimeError(f"points {only}: blis-cosim failed: {proc.stderr.strip()}")
        with open(results, newline="") as f:
            rows = list(csv.reader(f))
        with open(os.path.join(out, "timings.csv"), newline="") as f:
            timings = list(csv.reader(f))[1:]
        files = {}
        for sub in ("points", "configs", "workloads"):
            folder = os.path.join(out, sub)
            for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
                with open(os.path.join(folder, name), "rb") as f:
                    files[os.path.join(sub, name)] = f.read()
        return {"header": rows[0], "rows": rows[1:], "timings": timings, "files": files}


def _write_atomically(path, text):
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=folder)
    with os.fdopen(fd, "w", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def _csv_text(header, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _point_ids(binary, space):
    out = subprocess.run(
        [binary, "sweep", "--space", space, "--list-points"], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr.strip() or "blis-cosim sweep --list-points failed")
    import json

    return [json.loads(line)["id"] for line in out.stdout.splitlines() if line.strip()]


def _merge(out, header, rows, timings, results):
    """Adds each task's output to the table and files under `out`."""
    for res in results:
        strip = [i for i, h in enumerate(res["header"]) if h not in ("pareto", "meets_slo")]
        names = [res["header"][i] for i in strip]
        if header is not None and names != header:
            raise SystemExit(f"{out}/results.csv has other columns than this sweep; give another --out")
        header = names
        for row in res["rows"]:
            rows[int(row[0])] = [row[i] for i in strip]
        for point, wall in res["timings"]:
            timings[int(point)] = wall
        for rel, data in res["files"].items():
            os.makedirs(os.path.join(out, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(out, rel), "wb") as f:
                f.write(data)
    return header


def run_sweep(binary, space, out, chunk=10, report_flags=()):
    """Runs the sweep `space` on the connected Ray cluster into `out`; returns the number of
    failed points."""
    space = os.path.abspath(space)
    os.makedirs(out, exist_ok=True)
    ids = _point_ids(binary, space)
    if os.path.exists(os.path.join(out, "results.csv")):
        # Runs no point: checks that `out` holds this spec's results (refused otherwise).
        check = subprocess.run(
            [binary, "sweep", "--space", space, "--out", out, "--only-points", ""],
            capture_output=True,
            text=True,
        )
        if check.returncode != 0:
            raise SystemExit(check.stderr.strip())
    header, rows = _finished(os.path.join(out, "results.csv"))
    timings = {}
    if os.path.exists(os.path.join(out, "timings.csv")):
        with open(os.path.join(out, "timings.csv"), newline="") as f:
            timings = {int(r[0]): r[1] for r in list(csv.reader(f))[1:] if int(r[0]) in rows}
    todo = [i for i in ids if i not in rows]
    chunks = [todo[k : k + chunk] for k in range(0, len(todo), chunk)]
    futures = [run_chunk.remote(binary, space, c) for c in chunks]
    print(f"{len(todo)} point(s) to run in {len(chunks)} Ray task(s); {len(rows)} already finished",
          file=sys.stderr)
    header = _merge(out, header, rows, timings, ray.get(futures))
    ordered = [rows[i] for i in sorted(rows)]
    _write_atomically(os.path.join(out, "results.csv"), _csv_text(header, ordered))
    _write_atomically(
        os.path.join(out, "timings.csv"),
        _csv_text(["point", "wall_s"], [[str(i), timings[i]] for i in sorted(timings)]),
    )
    report = subprocess.run([binary, "sweep", "--report", out, *report_flags])
    if report.returncode != 0:
        raise SystemExit("blis-cosim sweep --report failed")
    status = header.index("status")
    return sum(1 for r in ordered if r[status] != "ok")


def main(argv=None):
    p = argparse.ArgumentParser(prog="blis-cosim-ray", description=__doc__.split("\n")[0])
    p.add_argument("--space", required=True, help="the sweep spec (YAML)")
    p.add_argument("--out", required=True, help="folder of results.csv and the rest")
    p.add_argument("--binary", default="blis-cosim", help="blis-cosim on every node")
    p.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of a local Ray")
    p.add_argument("--chunk", type=int, default=10, help="points per Ray task")
    p.add_argument("--objectives")
    p.add_argument("--slo")
    p.add_argument("--cost")
    p.add_argument("--plot-format")
    a = p.parse_args(argv)
    flags = []
    for name in ("objectives", "slo", "cost", "plot_format"):
        if getattr(a, name):
            flags += ["--" + name.replace("_", "-"), getattr(a, name)]
    if a.address:
        ray.init(address=a.address)
    else:
        ray.init(num_cpus=a.num_cpus, include_dashboard=False)
    failed = run_sweep(a.binary, a.space, a.out, max(1, a.chunk), flags)
    if failed:
        print(f"blis-cosim-ray: {failed} point(s) failed (status `failed` in results.csv)", file=sys.stderr)
        return 1
    return 0
