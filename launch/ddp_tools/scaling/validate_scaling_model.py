"""validate_scaling_model.py: the scaling model against ddp_train on this machine (a
benchmark, not a test: the host is shared and noisy, so the errors it prints are the result).

Runs ddp_train with --trace at N = 1 and at N = 2 CPU ranks (--threads 1), optionally
measures bench_allreduce at N = 2 first (--bench), predicts N = 2's step time, exposed
communication, hidden share (1 - exposed/comm) and each bucket's exposure from the N = 1
trace with the cpu-host cluster (or the fresh table), and compares with the N = 2 trace:
step = median `step` event, exposed = the step's `comm_wait` events, comm = its `comm`
events, a bucket's exposure = the part of its collective after the step's last backward.
A second prediction takes the compute from the N = 2 trace itself, so the communication
model's error shows apart from the compute's (two ranks on two shared cores are slower).

  launch/validate_scaling_model.py --trainer build/ddp_train --bench build/bench_allreduce \\
      --out launch/results/2026-12-01-scaling-validation.md
  launch/validate_scaling_model.py --from-traces n1.rank0.json n2.rank0.json   # no runs
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from ddp_tools.common import tool_files
from ddp_tools.scaling import scaling_model_inputs as inputs
from ddp_tools.scaling.scaling_model_core import ModelError, simulate_step

MPIRUN = ["mpirun", "-np", "2", "--oversubscribe", "--allow-run-as-root"]
REPORT = tool_files.text_kind("a validation report", "# Scaling model validation")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trainer", default="build/ddp_train")
    p.add_argument("--bench", metavar="BENCH_ALLREDUCE", help="measure this bench_allreduce at N = 2 first")
    p.add_argument("--layers", default="10,1024,1024,1024,10")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=25, help="steps run; traced 1:steps, step 1 dropped")
    p.add_argument("--workdir", help="where the traces go (default: a temporary directory, kept)")
    p.add_argument("--from-traces", nargs=2, metavar=("N1_RANK0", "N2_RANK0"), help="compare existing traces")
    p.add_argument("--allreduce-table", help="a bench_allreduce --markdown table at N = 2 instead of cpu-host")
    p.add_argument("--out", help="also write the Markdown report here")
    args = p.parse_args(argv)
    for flag, value in (("--steps", args.steps), ("--batch-size", args.batch_size)):
        if value < 1:
            p.error(f"{flag} {value}: expected >= 1")
    return args


def check_paths(args):
    """Refuses, before any run, a program that cannot run, a --workdir that is a file and an --out
    that is an input or someone else's file (ModelError)."""
    if not args.from_traces:
        for flag, program in (("--trainer", args.trainer), ("--bench", args.bench)):
            if program and not (os.path.isfile(program) and os.access(program, os.X_OK)):
                raise ModelError(f"{flag} {program}: not an executable file")
        if args.workdir and os.path.exists(args.workdir) and not os.path.isdir(args.workdir):
            raise ModelError(f"--workdir {args.workdir}: exists and is not a directory")
    if args.out:
        read = list(args.from_traces or []) + ([args.allreduce_table] if args.allreduce_table else [])
        try:
            tool_files.check_outputs([(args.out, f"--out {args.out}", REPORT)], read)
        except tool_files.FileError as e:
            raise ModelError(str(e))


def run(cmd, what):
    print("$ " + " ".join(cmd), flush=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    except OSError as e:
        raise ModelError(f"{what}: cannot run {cmd[0]} ({e.strerror})")
    if done.returncode != 0:
        # The program's own error line, not mpirun's banner after it.
        lines = done.stderr.strip().splitlines()
        said = [line for line in lines if ": error" in line] or lines or ["(no output)"]
        raise ModelError(f"{what} failed (status {done.returncode}): {said[-1]}")
    return done.stdout


def run_traces(args, workdir):
    common = ["--device", "cpu", "--threads", "1", "--data", "synthetic", "--layers", args.layers,
              "--batch-size", str(args.batch_size), "--steps", str(args.steps), "--log-every", str(args.steps),
              "--trace-steps", f"1:{args.steps}", "--no-prefetch"]
    table = args.allreduce_table
    if args.bench:
        table = os.path.join(workdir, "bench_np2.md")
        out = run(MPIRUN + [args.bench, "--markdown", "--min-bytes", "256K", "--max-bytes", "8M", "--iters", "5",
                            "--warmup", "2"], "bench_allreduce at N = 2")
        with open(table, "w") as f:
            f.write(out)
    run([args.trainer] + common + ["--trace", os.path.join(workdir, "n1.json")], "ddp_train at N = 1")
    run(MPIRUN + [args.trainer] + common + ["--trace", os.path.join(workdir, "n2.json")], "ddp_train at N = 2")
    return os.path.join(workdir, "n1.rank0.json"), os.path.join(workdir, "n2.rank0.json"), table


def measured(trace, path):
    """Medians over the kept steps of N = 2's rank-0 trace."""
    try:
        events = inputs.rank_events(trace)
    except ModelError as e:
        raise ModelError(f"{path}: {e}")
    kept = set(inputs.steps_of(events, path))
    per = {s: {"step": 0.0, "exposed": 0.0, "comm": 0.0, "bwd_end": 0.0, "buckets": {}} for s in kept}
    for e in events:
        s = e.get("args", {}).get("step")
        if s not in per:
            continue
        acc, cat, end = per[s], e.get("cat"), e["ts"] + e["dur"]
        if cat == "step":
            acc["step"] += e["dur"] * 1e-6
        elif cat == "comm_wait":
            acc["exposed"] += e["dur"] * 1e-6
        elif cat == "comm":
            acc["comm"] += e["dur"] * 1e-6
            if "bucket" in e["args"]:
                acc["buckets"][e["args"]["bucket"]] = (e["ts"], end)
        elif cat == "backward":
            acc["bwd_end"] = max(acc["bwd_end"], end)
    if not any(a["comm"] for a in per.values()):
        raise ModelError(f"{path}: no 'comm' events (is it a trace of N >= 2 ranks?)")
    med = statistics.median
    out = {k: med([a[k] for a in per.values()]) for k in ("step", "exposed", "comm")}
    n_buckets = max(len(a["buckets"]) for a in per.values())
    out["buckets"] = [med([max(0.0, (a["buckets"][b][1] - max(a["buckets"][b][0], a["bwd_end"])) * 1e-6)
                           for a in per.values() if b in a["buckets"]]) for b in range(n_buckets)]
    out["hidden"] = 1 - out["exposed"] / out["comm"] if out["comm"] > 0 else 1.0
    # Each step's collectives in the order they ran: their median durations.
    per_step = [sorted((e for e in events if e.get("cat") == "comm" and e.get("args", {}).get("step") == s),
                       key=lambda e: e["ts"]) for s in kept]
    count = min(len(c) for c in per_step)
    out["costs"] = [med([c[i]["dur"] * 1e-6 for c in per_step]) for i in range(count)]
    return out


def predict(profile, cluster, costs=None):
    r = simulate_step(profile, 2, cluster, "auto", profile.zero_stage, profile.micro_batches, measured_costs=costs)
    return {"step": r.step_s, "exposed": r.exposed_s, "comm": r.comm_s, "hidden": r.hidden_fraction,
            "buckets": r.bucket_exposed_s}


def report(n1_path, n2_path, table, args):
    cluster = inputs.load_cluster("cpu-host")
    source = "the cpu-host preset (fitted 2026-12-01)"
    if table:
        ranks, alpha, beta, link = inputs.fit_table(table)
        cluster.fitted[ranks] = (link[1], link[0])
        source = f"{table} (N = {ranks}: a = {alpha * 1e6:.1f} us, bus {link[1] / 1e9:.3f} GB/s)"
    n1 = inputs.profile_from_trace(inputs.load_trace(n1_path), n1_path)
    n2_trace = inputs.load_trace(n2_path)
    n2 = inputs.profile_from_trace(n2_trace, n2_path)
    got = measured(n2_trace, n2_path)
    from_n1, from_n2 = predict(n1, cluster), predict(n2, cluster)
    schedule_only = predict(n2, cluster, got["costs"])
    lines = ["# Scaling model validation: N = 2 CPU ranks predicted from N = 1", "",
             f"Traces: `{n1_path}` (N = 1), `{n2_path}` (N = 2, rank 0). Communication: {source}.",
             f"N = 1 measured step {n1.measured_step_s * 1e3:.2f} ms; compute at N = 2 (from its trace, "
             f"comm waits excluded) {(from_n2['step'] - from_n2['exposed']) * 1e3:.2f} ms.", "",
             "| quantity | predicted from N = 1 | error | predicted, N = 2's compute | error | "
             "schedule only: N = 2's compute and collective times | error | measured |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def row(name, key, scale=1e3, unit="ms", index=None):
        pick = (lambda d: d[key][index] if index < len(d[key]) else float("nan")) if index is not None \
            else (lambda d: d[key])
        m = pick(got)
        cells = []
        for pred in (from_n1, from_n2, schedule_only):
            p = pick(pred)
            if unit == "%":  # a share: the error in percentage points
                err = f"{(p - m) * 100:+.0f} pp"
            elif m > 0.05 * got["step"]:
                err = f"{(p - m) / m * 100:+.0f}%"
            else:  # next to nothing measured: a ratio would say nothing, the difference does
                err = f"{(p - m) * scale:+.2f} {unit}"
            cells += [f"{p * scale:.2f} {unit}", err]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {m * scale:.2f} {unit} |")

    row("step time", "step")
    row("communication (sum of collectives)", "comm")
    row("exposed communication", "exposed")
    row("hidden share (1 - exposed/comm)", "hidden", 100, "%")
    for b in range(len(got["buckets"])):
        row(f"bucket {b} exposure", "buckets", index=b)
    lines += ["", "Errors are (predicted - measured) / measured; the hidden share's in percentage points, and a time's "
              "in ms where the measured one is under 5% of the step (a ratio to next to nothing says nothing). The host has "
              "2 cores shared with other work: two ranks with a communication thread each oversubscribe it, which "
              "the model does not know. The last prediction takes N = 2's per-layer compute and each collective's "
              "measured duration from its trace and checks the overlap arithmetic alone (bucket order, FIFO "
              "communication, exposure); the first two also test the alpha-beta cost of an isolated "
              "bench_allreduce against collectives that share the cores with backward."]
    text = "\n".join(lines)
    print(text)
    if args.out:
        try:
            tool_files.write_text_atomic(args.out, f"--out {args.out}", text + "\n")
        except tool_files.FileError as e:
            raise ModelError(str(e))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    check_paths(args)
    if args.from_traces:
        n1_path, n2_path = args.from_traces
        table = args.allreduce_table
    else:
        workdir = args.workdir or tempfile.mkdtemp(prefix="validate_scaling_")
        os.makedirs(workdir, exist_ok=True)
        n1_path, n2_path, table = run_traces(args, workdir)
    report(n1_path, n2_path, table, args)
    return 0


def cli():
    try:
        return main()
    except ModelError as e:
        print(f"validate_scaling_model: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(cli())
