"""validate_scaling_model.py: the scaling model against ddp_train on this machine (a
benchmark, not a test: the host is shared and noisy, so the errors it prints are the result).

Runs ddp_train with --trace at N = 1 and at each N of --ranks (CPU ranks, --threads 1) in
each of --settings (ZeRO stage, --zero-prefetch depth, --zero-shard-size groups; see
validation_runs.py), optionally measures bench_allreduce at each N first (--bench),
predicts each run's step time, exposed communication, hidden share (1 - exposed/comm) and
each bucket's exposure from the N = 1 trace with the cpu-host cluster (or the fresh
tables), and compares with the N-rank trace (trace_exposure.py: step = median `step`
event; exposed = the step's `comm_wait` events plus the layers' waits for their gathered
weights; comm = its `comm` events; a bucket's exposure = the part of its collective after
the step's last backward). A second prediction takes the compute from the N-rank trace
itself, so the communication model's error shows apart from the compute's (ranks sharing
two cores are slower); a third also takes each collective's measured duration, leaving
the schedule's arithmetic alone.

  launch/validate_scaling_model.py --trainer build/ddp_train --bench build/bench_allreduce \\
      --out launch/results/2026-12-01-scaling-validation.md            # MLP, N = 2, ZeRO 0
  launch/validate_scaling_model.py --trainer build/ddp_train --bench build/bench_allreduce \\
      --model gpt --ranks 2,4 --settings all --workdir runs/gpt           # 10 settings
  launch/validate_scaling_model.py --from-dir runs/gpt                      # again, no runs
  launch/validate_scaling_model.py --from-traces n1.rank0.json n2.rank0.json   # no runs
"""
import argparse
import copy
import os
import statistics
import sys
import tempfile

from ddp_tools.common import tool_files
from ddp_tools.scaling import scaling_model_inputs as inputs
from ddp_tools.scaling import trace_exposure
from ddp_tools.scaling import validation_runs as runs
from ddp_tools.scaling.scaling_model_core import ModelError, simulate_step

PREDICTIONS = ("from_n1", "from_nN", "schedule_only")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trainer", default="build/ddp_train")
    p.add_argument("--bench", metavar="BENCH_ALLREDUCE", help="measure this bench_allreduce at each N first")
    p.add_argument("--model", default="mlp", choices=["mlp", "gpt"],
                   help="mlp: --layers on synthetic data; gpt: the README's GPT (4 x 128, context 128, bytes)")
    p.add_argument("--layers", default="10,1024,1024,1024,10", help="the MLP's widths")
    p.add_argument("--batch-size", type=int, help="rows per rank (default: MLP 32, GPT 16)")
    p.add_argument("--gpt-text", help="--model gpt: the training text (default: random letters in --workdir)")
    p.add_argument("--ranks", default="2", help="comma-separated N >= 2 (default 2)")
    p.add_argument("--settings", default="z0",
                   help=f"comma-separated z<stage>[-g<G>][-p<depth>], or all ({','.join(runs.ALL_SETTINGS)}); "
                        "default z0")
    p.add_argument("--steps", type=int, default=25, help="steps run; traced 1:steps, step 1 dropped")
    p.add_argument("--workdir", help="where the traces go (default: a temporary directory, kept)")
    p.add_argument("--from-traces", nargs=2, metavar=("N1_RANK0", "NN_RANK0"), help="compare existing traces")
    p.add_argument("--zero-prefetch", type=int, default=1,
                   help="--from-traces: the N-rank run's --zero-prefetch (its ZeRO stage is the trace's)")
    p.add_argument("--zero-shard-size", type=int, help="--from-traces: the N-rank run's --zero-shard-size")
    p.add_argument("--from-dir", metavar="WORKDIR", help="compare the traces an earlier run left in WORKDIR")
    p.add_argument("--allreduce-table", action="append", default=[], metavar="FILE",
                   help="a bench_allreduce --markdown table instead of cpu-host, for N up to its N (repeatable)")
    p.add_argument("--out", help="also write the Markdown report here")
    tool_files.add_overwrite_flag(p)
    args = p.parse_args(argv)
    for flag, value in (("--steps", args.steps), ("--batch-size", args.batch_size or 1)):
        if value < 1:
            p.error(f"{flag} {value}: expected >= 1")
    try:
        args.ranks = sorted({int(r) for r in args.ranks.split(",")})
    except ValueError:
        p.error(f"--ranks {args.ranks}: expected comma-separated integers")
    if args.ranks[0] < 2:
        p.error("--ranks: every N must be >= 2 (N = 1 is the baseline, always run)")
    if args.from_traces and args.from_dir:
        p.error("--from-traces and --from-dir: give one")
    return args


def check_paths(args):
    """Refuses, before any run, a program that cannot run, a --workdir that is a file and an --out
    that is an input or someone else's file without --overwrite (ModelError)."""
    if not (args.from_traces or args.from_dir):
        for flag, program in (("--trainer", args.trainer), ("--bench", args.bench)):
            if program and not (os.path.isfile(program) and os.access(program, os.X_OK)):
                raise ModelError(f"{flag} {program}: not an executable file")
        if args.workdir and os.path.exists(args.workdir) and not os.path.isdir(args.workdir):
            raise ModelError(f"--workdir {args.workdir}: exists and is not a directory")
        runs.settings(args.settings, args.ranks)  # a bad name fails before any run
    if args.out:
        read = list(args.from_traces or []) + args.allreduce_table
        try:
            tool_files.check_outputs([(args.out, f"--out {args.out}")], read, args.overwrite)
        except tool_files.FileError as e:
            raise ModelError(str(e))


def load_cluster(tables):
    """cpu-host, with each table's fit replacing its figures for N up to the table's N."""
    cluster = inputs.load_cluster("cpu-host")
    said = ["the cpu-host preset (fitted 2026-12-01)"]
    for path in tables:
        ranks, alpha, beta, link = inputs.fit_table(path)
        cluster.fitted[ranks] = (link[1], link[0])
        said.append(f"`{os.path.basename(path)}` (N = {ranks}: a = {alpha * 1e6:.1f} us, bus {link[1] / 1e9:.3f} GB/s)")
    return cluster, (said[0] if len(said) == 1 else "; ".join(said[1:]) + " (fitted, each for N up to its own)")


def measured(trace, path, shard_size=None):
    """Medians over the kept steps of an N-rank trace's rank 0 (trace_exposure.measure)."""
    try:
        events = inputs.rank_events(trace)
        other = trace.get("otherData", {})
        buckets = [(float(b["bytes"]), int(b["ready_after_layer"])) for b in other.get("buckets", [])]
        zero, micro = int(other.get("zero_stage", 0)), int(other.get("micro_batches", 1))
        return trace_exposure.measure(events, inputs.steps_of(events, path), zero, buckets, micro, path)
    except (ModelError, ValueError, KeyError, TypeError) as e:
        raise ModelError(f"{path}: {e}" if path not in str(e) else str(e))


def predict(profile, setting, cluster, costs=None):
    r = simulate_step(profile, setting.ranks, cluster, "auto", setting.zero, profile.micro_batches,
                      zero3_prefetch=setting.prefetch, measured_costs=costs, shard_size=setting.shard_size)
    return {"step": r.step_s, "exposed": r.exposed_s, "comm": r.comm_s, "hidden": r.hidden_fraction,
            "buckets": r.bucket_exposed_s, "ready_to_update": r.ready_to_update_s}


def compare(n1, n1_path, trace_path, setting, cluster, layer_bytes=None):
    """One run: the N = 1 profile's prediction, the N-rank trace's own compute's, the schedule
    alone's, and the measurement."""
    trace = inputs.load_trace(trace_path)
    world = int(trace["otherData"].get("world_size", setting.ranks))
    if world != setting.ranks or int(trace["otherData"].get("zero_stage", -1)) != setting.zero:
        raise ModelError(f"{trace_path}: a trace of N = {world}, ZeRO {trace['otherData'].get('zero_stage')}, "
                         f"not of {setting.label()} at N = {setting.ranks}")
    nN = inputs.profile_from_trace(trace, trace_path, shard_size=setting.shard_size)
    got = measured(trace, trace_path)
    if layer_bytes is not None and len(layer_bytes) == len(n1.layer_bytes):
        n1.layer_bytes = list(layer_bytes)  # the model's structure, not a timing: the N = 1 trace lacks it
    # The N-rank trace's compute already ran on shared cores: no slowdown on top.
    own = copy.copy(cluster)
    own.cores_per_node = None
    return {"setting": setting, "trace": trace_path, "got": got, "n1": n1, "nN": nN,
            "from_n1": predict(n1, setting, cluster), "from_nN": predict(nN, setting, own),
            "schedule_only": predict(nN, setting, own, got["costs"])}


def error_cell(p, m, step, scale=1e3, unit="ms"):
    """(predicted - measured) / measured; a share's in percentage points; a time's in ms where the
    measured one is under 5% of the step (a ratio to next to nothing says nothing)."""
    if unit == "%":
        return f"{(p - m) * 100:+.0f} pp"
    if m > 0.05 * step:
        return f"{(p - m) / m * 100:+.0f}%"
    return f"{(p - m) * scale:+.2f} {unit}"


def summary(results):
    lines = ["| N | setting | step: predicted from N = 1 | measured | error | exposed: predicted from N = 1 "
             "| error | predicted, N's compute | error | schedule only | measured | hidden: predicted | measured |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        got, a, b, c = r["got"], r["from_n1"], r["from_nN"], r["schedule_only"]
        st = got["step"]
        lines.append(f"| {r['setting'].ranks} | {r['setting'].label()} | {a['step'] * 1e3:.2f} ms | {st * 1e3:.2f} ms "
                     f"| {error_cell(a['step'], st, st)} | {a['exposed'] * 1e3:.2f} ms "
                     f"| {error_cell(a['exposed'], got['exposed'], st)} | {b['exposed'] * 1e3:.2f} ms "
                     f"| {error_cell(b['exposed'], got['exposed'], st)} | {c['exposed'] * 1e3:.2f} ms "
                     f"| {got['exposed'] * 1e3:.2f} ms | {a['hidden'] * 100:.0f}% | {got['hidden'] * 100:.0f}% |")
    return lines


def model_error(results):
    """The stated error, medians over the runs of |predicted - measured|: of the exposed
    communication relative to the measured exposed time (over the runs whose measured
    exposure is at least 5% of the step: a ratio to next to nothing says nothing) and
    relative to the measured step (every run); of the step time; of the tail from the last
    gradient's ready point to the update."""
    med = statistics.median
    out = {}
    for key in PREDICTIONS:
        rel = [abs(r[key]["exposed"] - r["got"]["exposed"]) / r["got"]["exposed"] for r in results
               if r["got"]["exposed"] >= 0.05 * r["got"]["step"]]
        tails = [abs(r[key]["ready_to_update"] - r["got"]["ready_to_update"]) / r["got"]["ready_to_update"]
                 for r in results if r["got"]["ready_to_update"] > 0]
        out[key] = {"exposed": med(rel) if rel else float("nan"), "runs": len(rel),
                    "exposed_of_step": med([abs(r[key]["exposed"] - r["got"]["exposed"]) / r["got"]["step"]
                                            for r in results]),
                    "step": med([abs(r[key]["step"] - r["got"]["step"]) / r["got"]["step"] for r in results]),
                    "tail": med(tails) if tails else float("nan")}
    return out


def details(r):
    """The per-run table (the report's whole content before the settings: N = 2, ZeRO 0)."""
    got = r["got"]
    lines = [f"N = 1 measured step {r['n1'].measured_step_s * 1e3:.2f} ms; compute at N = {r['setting'].ranks} (from "
             f"its trace, waits for communication excluded) {(r['from_nN']['step'] - r['from_nN']['exposed']) * 1e3:.2f} ms; "
             f"layers' waits for weights (in exposed) {got['layer_waits'] * 1e3:.2f} ms.", "",
             "| quantity | predicted from N = 1 | error | predicted, N's compute | error | "
             "schedule only: N's compute and collective times | error | measured |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def row(name, key, scale=1e3, unit="ms", index=None):
        pick = (lambda d: d[key][index] if index < len(d[key]) else float("nan")) if index is not None \
            else (lambda d: d[key])
        m = pick(got)
        cells = []
        for pred in (r[k] for k in PREDICTIONS):
            p = pick(pred)
            cells += [f"{p * scale:.2f} {unit}", error_cell(p, m, got["step"], scale, unit)]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {m * scale:.2f} {unit} |")

    row("step time", "step")
    row("communication (sum of collectives)", "comm")
    row("exposed communication", "exposed")
    row("hidden share (1 - exposed/comm)", "hidden", 100, "%")
    row("last gradient ready to the update", "ready_to_update")
    for b in range(len(got["buckets"])):
        row(f"bucket {b} exposure", "buckets", index=b)
    return lines


def report(model, n1_path, results, source, args):
    ranks = sorted({r["setting"].ranks for r in results})
    err = model_error(results)
    lines = [f"# Scaling model validation: N = {', '.join(map(str, ranks))} CPU ranks predicted from N = 1 ({model})",
             "", f"N = 1 trace: `{n1_path}`. Communication: {source}.", ""] + summary(results) + [
        "", "Model error: medians over the runs above of |predicted - measured|, for the exposed communication "
            "relative to the measured exposed time (runs whose measured exposure is at least 5% of the step) and to "
            "the measured step (all runs), the step time, and the tail from the last gradient bucket's ready point "
            "to the update:", "",
        "| prediction | exposed / measured exposed | exposed / measured step | step time | ready-to-update tail |",
        "| --- | ---: | ---: | ---: | ---: |"]
    names = {"from_n1": "from N = 1 (the model as a user runs it)", "from_nN": "the N-rank trace's compute",
             "schedule_only": "schedule only (measured collective times)"}
    for key in PREDICTIONS:
        e = err[key]
        lines.append(f"| {names[key]} | {e['exposed'] * 100:.0f}% ({e['runs']} runs) | {e['exposed_of_step'] * 100:.1f}% "
                     f"| {e['step'] * 100:.0f}% | {e['tail'] * 100:.0f}% |")
    for r in results:
        lines += ["", f"## N = {r['setting'].ranks}, {r['setting'].label()}", "", f"Trace: `{r['trace']}`.", ""]
        lines += details(r)
    lines += ["", "Errors are (predicted - measured) / measured; the hidden share's in percentage points, and a time's "
              "in ms where the measured one is under 5% of the step. Exposed = the compute thread's waits: `comm_wait` "
              "spans and, at ZeRO >= 1, the gaps before a layer while the gather it needs runs. The host has "
              "2 cores shared with other work: N ranks with a communication thread each oversubscribe it, which "
              "the model does not know. The last prediction takes the N-rank trace's per-layer compute and each "
              "collective's measured duration and checks the overlap arithmetic alone (bucket order, FIFO "
              "communication, prefetch, exposure); the first two also test the alpha-beta cost of an isolated "
              "bench_allreduce against collectives that share the cores with compute."]
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    check_paths(args)
    if args.from_traces:
        n1_path, nN_path = args.from_traces
        n2 = inputs.load_trace(nN_path)["otherData"]
        try:
            zero, world = int(n2.get("zero_stage", 0)), int(n2.get("world_size", 2))
        except (TypeError, ValueError):
            raise ModelError(f"{nN_path}: otherData.zero_stage or world_size is not an integer")
        name = f"z{zero}" + (f"-g{args.zero_shard_size}" if args.zero_shard_size and zero else "") + \
            (f"-p{args.zero_prefetch}" if zero == 3 else "")
        plan = {"model": "traces", "n1": n1_path, "runs": [{"setting": runs.Setting(name, world), "trace": nN_path}],
                "tables": {}}
    elif args.from_dir:
        plan = runs.load_manifest(args.from_dir)
    else:
        workdir = args.workdir or tempfile.mkdtemp(prefix="validate_scaling_")
        os.makedirs(workdir, exist_ok=True)
        plan = runs.run_all(args, workdir, runs.settings(args.settings, args.ranks))
    cluster, source = load_cluster(args.allreduce_table or [plan["tables"][n] for n in sorted(plan["tables"])])
    # The layers' weight bytes (ZeRO-3's gathers, the prefetch's unit) are in a ZeRO-3
    # trace's gathers; an N = 1 trace has none (its buckets give only an even split).
    layer_bytes = None
    for r in plan["runs"]:
        if r["setting"].zero == 3:
            layer_bytes = inputs.profile_from_trace(inputs.load_trace(r["trace"]), r["trace"]).layer_bytes
            break
    n1_trace = inputs.load_trace(plan["n1"])
    # A fresh N = 1 profile per run: compare() gives it the layer bytes.
    results = [compare(inputs.profile_from_trace(n1_trace, plan["n1"]), plan["n1"], r["trace"], r["setting"], cluster,
                       layer_bytes) for r in plan["runs"]]
    text = report(plan["model"], plan["n1"], results, source, args)
    print(text)
    if args.out:
        try:
            tool_files.write_text_atomic(args.out, f"--out {args.out}", text + "\n", "validate_scaling_model.py --out")
        except tool_files.FileError as e:
            raise ModelError(str(e))
    return 0


def cli():
    try:
        return main()
    except ModelError as e:
        print(f"validate_scaling_model: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(cli())
