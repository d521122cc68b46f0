"""scaling_model.py: project ddp_train's step time, exposed communication and scaling
efficiency from one traced rank (or a synthetic model) to N = 1 ... 4096 ranks.

  launch/scaling_model.py --trace run.rank0.json --cluster cpu-host --csv m.csv --png m.png
  launch/scaling_model.py --synthetic gpt2-124m --cluster h200-8x-nvlink-ib --zero 3 --md m.md
  launch/scaling_model.py --projection launch/results/2026-12-01-scaling-projection.md

The arithmetic is in scaling_model_core.py (collective costs, the step's schedule), the
inputs in scaling_model_inputs.py (trace, synthetic models, clusters, bench tables).
Each projected configuration is first put to the trainer's own start-up rules
(`ddp_train --check-worlds`, trainer_rules.py): a row it would refuse is left out and said.
Bad input: one line on stderr, exit status 2. matplotlib is needed for --png only.
Outputs are checked before the model runs and written whole (launch/ddp_tools/common/tool_files.py):
one that is an input is refused, and so is an existing file that neither ddp_train nor one of its
tools wrote, unless --overwrite; an earlier output of this project's is replaced, said on stderr.
"""
import argparse
import csv
import sys

from ddp_tools.common import tool_files
from ddp_tools.scaling import scaling_model_inputs as inputs
from ddp_tools.scaling import trainer_rules
from ddp_tools.scaling.checkpoint_cost import STORAGE, checkpoint_cost, state_bytes
from ddp_tools.scaling.scaling_model_core import ModelError, collective_s, simulate_step

CSV_COLUMNS = ["ranks", "mode", "algorithm", "zero_stage", "step_s", "compute_s", "comm_s", "exposed_s",
               "hidden_fraction", "samples_per_s", "speedup", "efficiency"]
DEFAULT_RANKS = [2 ** i for i in range(13)]
OUTPUT_FLAGS = ("csv", "md", "png", "projection")


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        print(f"scaling_model: error: {message}", file=sys.stderr)
        sys.exit(2)

    def exit(self, status=0, message=None):
        if message:
            sys.stderr.write(message)
        sys.exit(status)


def parse_args(argv):
    p = OneLineParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--trace", help="one rank's ddp_train trace (run.rank0.json)")
    src.add_argument("--synthetic", choices=["gpt2-124m", "mlp-wide"], help="a synthetic H200 profile")
    src.add_argument("--projection", metavar="FILE.md", help="write the GPT-2/wide-MLP projection table")
    p.add_argument("--cluster", default="h200-8x-nvlink-ib", help="h200-8x-nvlink-ib | cpu-host | FILE.json")
    p.add_argument("--allreduce-table", action="append", default=[], metavar="FILE",
                   help="`bench_allreduce --markdown` output; its fit replaces the cluster's figures "
                        "for N up to its N (repeatable)")
    p.add_argument("--algorithm", default="auto", choices=["ring", "tree", "auto"])
    p.add_argument("--zero", type=int, choices=[0, 1, 2, 3], help="ZeRO stage (default: the trace's)")
    p.add_argument("--zero-prefetch", type=int, default=0, metavar="D",
                   help="ZeRO 3: each layer's gather started D layers ahead (the trainer's --zero-prefetch; "
                        "default 0 here: each at its own layer)")
    p.add_argument("--zero3-prefetch", action="store_true", help="the same as --zero-prefetch 1")
    p.add_argument("--zero-shard-size", type=int, default=None, metavar="G",
                   help="hybrid sharding at --zero >= 1: state sharded within groups of G ranks, gradients "
                        "reduce-scattered within a group and all-reduced across groups (default: the world)")
    p.add_argument("--grad-accum", type=int, help="micro-batches per step (default: the trace's)")
    p.add_argument("--ranks", default=",".join(map(str, DEFAULT_RANKS)), help="comma-separated N")
    p.add_argument("--mode", default="both", choices=["weak", "strong", "both"])
    p.add_argument("--mfu", type=float, default=0.4, help="achieved fraction of 989 TFLOP/s (synthetic)")
    p.add_argument("--csv", help="write the rows here (CSV)")
    p.add_argument("--png", help="write the efficiency and throughput plot here (PNG)")
    p.add_argument("--md", help="write the report here (Markdown)")
    tool_files.add_overwrite_flag(p)
    args = p.parse_args(argv)
    if not (args.trace or args.synthetic or args.projection):
        p.error("give --trace FILE, --synthetic gpt2-124m|mlp-wide or --projection FILE.md")
    try:
        args.ranks = sorted({int(r) for r in args.ranks.split(",")})
    except ValueError:
        p.error(f"--ranks {args.ranks}: expected comma-separated integers")
    if args.ranks[0] < 1:
        p.error("--ranks: every N must be >= 1")
    if args.grad_accum is not None and args.grad_accum < 1:
        p.error(f"--grad-accum {args.grad_accum}: expected >= 1")
    if args.zero_shard_size is not None and args.zero_shard_size < 1:
        p.error(f"--zero-shard-size {args.zero_shard_size}: expected >= 1")
    if args.zero_prefetch < 0:
        p.error(f"--zero-prefetch {args.zero_prefetch}: expected >= 0")
    args.zero3_prefetch = max(args.zero_prefetch, 1 if args.zero3_prefetch else 0)
    return args


def load_cluster(args):
    cluster, notes = inputs.load_cluster(args.cluster), []
    for path in args.allreduce_table:
        ranks, alpha, beta, (step_latency, bandwidth) = inputs.fit_table(path)
        cluster.fitted[ranks] = (bandwidth, step_latency)
        notes.append(f"{path}: measured at N = {ranks}, fitted a = {alpha * 1e6:.2f} us, bus bandwidth "
                     f"{bandwidth / 1e9:.3f} GB/s; used (as a ring) for N <= {ranks} instead of the cluster's figures")
    return cluster, notes


def sweep(profile, cluster, ranks_list, modes, algorithm, zero, accum, prefetch, shard_size=None, refused=None):
    """CSV rows (dicts) per mode and N, and the notes (strong scaling's stop, the rows
    left out because the trainer would refuse them: refused, {(mode, N): reason})."""
    rows, notes = [], []
    refused = refused or {}
    for mode in modes:
        base = simulate_step(profile, 1, cluster, algorithm, zero, accum, profile.rows, prefetch)
        base_rate = profile.rows * accum / base.step_s
        for n in ranks_list:
            per_rank = profile.rows if mode == "weak" else profile.rows / n
            if per_rank < 1:
                notes.append(f"Strong scaling stops before N = {n}: the {profile.rows:g} rows of one rank's "
                             "micro-batch would leave fewer than 1 row per rank.")
                break
            if (mode, n) in refused:
                notes.append(f"N = {n} ({mode}) left out: ddp_train refuses it: {refused[(mode, n)]}.")
                continue
            r = simulate_step(profile, n, cluster, algorithm, zero, accum, per_rank, prefetch, shard_size=shard_size)
            rate = per_rank * accum * n / r.step_s
            rows.append({"ranks": n, "mode": mode, "algorithm": "+".join(r.algorithms) or algorithm,
                         "zero_stage": zero, "step_s": r.step_s, "compute_s": r.compute_s, "comm_s": r.comm_s,
                         "exposed_s": r.exposed_s, "hidden_fraction": r.hidden_fraction, "samples_per_s": rate,
                         "speedup": rate / base_rate, "efficiency": rate / base_rate / n})
    return rows, notes


def assumptions(profile, cluster, args, zero, accum, extra):
    c = cluster
    lines = [
        f"Model: {profile.name}, {len(profile.forward_s)} layers, {profile.parameters:,} parameters, "
        f"{len(profile.buckets)} gradient buckets ({profile.gradient_bytes() / 2**20:.1f} MiB FP16), "
        f"{profile.rows:g} rows per rank per micro-batch, {accum} micro-batch(es), ZeRO {zero}.",
        f"Cluster {c.name} ({c.source}; a table below replaces them where it says so): "
        + ("all ranks on one host; " if c.gpus_per_node >= 1 << 20 else f"{c.gpus_per_node} ranks per node; ") +
        f"intra {c.intra.bandwidth_Bps / 1e9:g} GB/s per rank per direction, {c.intra.latency_s * 1e6:g} us per step; "
        f"inter {c.inter.bandwidth_Bps / 1e9:g} GB/s, {c.inter.latency_s * 1e6:g} us.",
        "Collectives (alpha-beta): ring all-reduce 2(N-1)a + 2(N-1)/N B/bw; reduce-scatter and all-gather "
        "(N-1)a + (N-1)/N B/bw; tree all-reduce 2 ceil(log2 N)a + 2B/bw (NCCL's double binary tree); above "
        "one node: intra reduce-scatter + inter all-reduce of B/G + intra all-gather, summed (not pipelined).",
        f"Algorithm: {args.algorithm}" + (" (the faster of ring and tree per collective, like NCCL's tuner)"
                                           if args.algorithm == "auto" else "") + ".",
        "Schedule: backward from the last layer down; a bucket's collective starts at max(the point in its "
        "layer's backward where the trace's bucket_ready instant puts it (the layer's end without one), the "
        "previous collective's end): one FIFO communication stream; exposed = the compute side's "
        "waits (after backward, ZeRO's gathers). Step = upload + forward + backward + other + optimizer + exposed.",
        "ZeRO 1/2: reduce-scatter per bucket, optimizer / N, the updated FP16 weights all-gathered chunk by "
        "chunk (the buckets' ranges, the first layers' first) under the next forward, each layer waiting for its "
        "own chunk (the trainer's since 2026-12-06). ZeRO 3: also each layer gathered before its forward and its "
        "backward " + (f"(started {args.zero3_prefetch} layer(s) ahead, as the trainer's --zero-prefetch "
                       f"{args.zero3_prefetch}; its default is 1)." if args.zero3_prefetch
                       else "(exposed: no prefetch, as the trainer's --zero-prefetch 0)."),
        ("Hybrid sharding (the trainer's --zero-shard-size G): the state sharded within groups of "
         f"{args.zero_shard_size} ranks (gathers over G), each bucket reduce-scattered within the group then "
         "its 1/G all-reduced across the groups (inter-node above one node), optimizer / G."
         if getattr(args, "zero_shard_size", None) else "No hybrid sharding: every stage shards over all N ranks."),
        f"Gradient accumulation: {accum} x forward+backward, gradient collectives in the last backward only.",
        "Compute is linear in rows per rank (strong scaling divides the 1-rank batch by N) and the same on "
        "every rank: no stragglers, no network contention or congestion, no jitter, no compute slowed by "
        "communication, perfect hierarchical placement (ranks packed by node)"
        + (f"; a node's ranks beyond its {c.cores_per_node:g} cores slow every rank's compute by ranks/cores."
           if c.cores_per_node else "."),
    ]
    if c.op_factors:
        lines.append("Per-op factors against the ring formula (measured on this transport): " + ", ".join(
            f"{op} x{f:g}" for op, f in sorted(c.op_factors.items())) + ".")
    if args.synthetic or args.projection:
        lines.append(f"Synthetic compute: GEMM FLOPs (forward 2mnk, backward 2x, the first Linear 1x) at 989 "
                     f"TFLOP/s x mfu {args.mfu:g}; optimizer 28 bytes/parameter (AdamW) at 4.8 TB/s HBM; "
                     "upload of the batch at 64 GB/s (PCIe Gen5 x16); buckets as the trainer plans them "
                     "(first 1 MiB, then 25 MiB, backward order, 2 bytes per parameter).")
    return lines + extra


def table(rows):
    out = ["| N | mode | algorithm | step (ms) | compute (ms) | comm (ms) | exposed (ms) | hidden | samples/s "
           "| efficiency |", "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append(f"| {r['ranks']} | {r['mode']} | {r['algorithm']} | {r['step_s'] * 1e3:.3f} | "
                   f"{r['compute_s'] * 1e3:.3f} | {r['comm_s'] * 1e3:.3f} | {r['exposed_s'] * 1e3:.3f} | "
                   f"{r['hidden_fraction'] * 100:.0f}% | {r['samples_per_s']:.4g} | {r['efficiency'] * 100:.1f}% |")
    return out


def check_outputs(args):
    """Refuses, before any work, an output that is an input, another output or someone else's file."""
    outputs = [(getattr(args, flag), f"--{flag} {getattr(args, flag)}") for flag in OUTPUT_FLAGS
               if getattr(args, flag)]
    read = [args.trace] + args.allreduce_table + ([args.cluster] if args.cluster not in inputs.PRESETS else [])
    try:
        tool_files.check_outputs(outputs, [p for p in read if p], args.overwrite)
    except tool_files.FileError as e:
        raise ModelError(str(e))


def write_text(path, flag, text):
    try:
        tool_files.write_text_atomic(path, f"--{flag} {path}", text, f"scaling_model.py --{flag}")
    except tool_files.FileError as e:
        raise ModelError(str(e))


def write_csv(path, rows):
    def write(f):
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    try:
        tool_files.write_atomic(path, f"--csv {path}", write, "scaling_model.py --csv")
    except tool_files.FileError as e:
        raise ModelError(str(e))


def write_png(path, rows, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ModelError("--png needs matplotlib (apt-get install python3-matplotlib)")
    fig, (ax_eff, ax_rate) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode, style in (("weak", "o-"), ("strong", "s--")):
        pts = [r for r in rows if r["mode"] == mode]
        if not pts:
            continue
        n = [r["ranks"] for r in pts]
        ax_eff.plot(n, [r["efficiency"] * 100 for r in pts], style, label=f"{mode} scaling")
        ax_rate.plot(n, [r["samples_per_s"] for r in pts], style, label=f"{mode} scaling")
    ticks = sorted({r["ranks"] for r in rows})
    ticks = ticks[::-(-len(ticks) // 7)]  # at most 7 labels: legible
    for ax in (ax_eff, ax_rate):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel("ranks N (GPUs)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    ax_eff.set_ylabel("scaling efficiency (%)")
    ax_eff.set_ylim(0, 105)
    ax_rate.set_yscale("log")
    ax_rate.set_ylabel("throughput (samples/s)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    try:
        tool_files.write_atomic(path, f"--png {path}", lambda f: fig.savefig(f, format="png", dpi=110),
                                "scaling_model.py --png", binary=True)
    except tool_files.FileError as e:
        raise ModelError(str(e))
    finally:
        plt.close(fig)


# The projection's rows: (ZeRO stage, prefetch, shard size G or None).
PROJECTION_SETTINGS = ((0, False, None), (3, False, None), (3, True, None), (3, False, 8), (3, True, 8))


def projection(args):
    """GPT-2 124M and the wide MLP at 8 ... 4096 H200s, weak scaling: ZeRO 0, 3, 3 with the
    trainer's prefetch, 3 with hybrid sharding over a node (G 8, the trainer's --zero-shard-size),
    and both; args.algorithm (auto by default)."""
    cluster, notes = load_cluster(args)
    lines = ["| model | ZeRO | N | step (ms) | compute (ms) | exposed comm (ms) | hidden | efficiency | algorithm |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name in ("gpt2-124m", "mlp-wide"):
        prof = inputs.synthetic_profile(name, args.mfu)
        for zero, prefetch, shard_size in PROJECTION_SETTINGS:
            rows, _ = sweep(prof, cluster, [8, 64, 512, 1024, 4096], ["weak"], args.algorithm, zero, 1, prefetch,
                            shard_size)
            label = f"{zero}{' + prefetch' if prefetch else ''}{f' + hybrid G {shard_size}' if shard_size else ''}"
            for r in rows:
                lines.append(f"| {name} | {label} | {r['ranks']} | {r['step_s'] * 1e3:.2f} | {r['compute_s'] * 1e3:.2f} "
                             f"| {r['exposed_s'] * 1e3:.2f} | {r['hidden_fraction'] * 100:.0f}% "
                             f"| {r['efficiency'] * 100:.1f}% | {r['algorithm']} |")
    lines += [""] + checkpoint_lines(args, cluster)
    prof = inputs.synthetic_profile("gpt2-124m", args.mfu)
    said = assumptions(prof, cluster, args, 0, 1, notes)[1:]
    said[4] = said[4].replace("(exposed: no prefetch, as the trainer's --zero-prefetch 0).",
                              "(exposed, as the trainer's --zero-prefetch 0; '+ prefetch': each gather issued one "
                              "layer ahead, under the previous layer's compute, as its default --zero-prefetch 1).")
    said[5] = ("'+ hybrid G 8' (the trainer's --zero-shard-size 8, its default on nodes of 8): the state sharded "
               "within each node's 8 GPUs (FSDP's HSDP): "
               "gathers over NVLink only; each bucket reduce-scattered in the node, then its 1/8 all-reduced "
               "across the nodes over InfiniBand; optimizer / 8.")
    said.append(f"Checkpoints (the table under the scaling rows): the whole FP32 state (masters and AdamW's two "
                f"moments, 12 bytes a parameter) every {CHECKPOINT_EVERY} steps, all-gathered in the shard group "
                f"(hybrid: the node's 8 over NVLink), copied to pinned host memory at "
                f"{STORAGE['h200-node'].host_copy_Bps / 1e9:.0f} GB/s and written by rank 0 to local NVMe at "
                f"{STORAGE['h200-node'].write_Bps / 1e9:.0f} GB/s (nominal); asynchronous: the steps wait for the "
                f"gather and the copy, the write runs beside them (launch/ddp_tools/scaling/checkpoint_cost.py).")
    return lines, said


# Steps between the projection's checkpoints (a GPT-2 run's usual order of magnitude).
CHECKPOINT_EVERY = 1000


def checkpoint_lines(args, cluster):
    """The projection's checkpoint table: at 1,024 H200s, ZeRO 0 and ZeRO 3 with prefetch and
    hybrid G 8, what one checkpoint blocks the steps for, synchronous and asynchronous, and
    that per step at one every CHECKPOINT_EVERY steps, beside the step time."""
    storage = STORAGE["h200-node"]
    lines = [f"Checkpoints at N = 1024, one every {CHECKPOINT_EVERY} steps (model, not measured):", "",
             "| model | ZeRO | state (GB) | gather (ms) | host copy (ms) | write (ms) | blocked, sync (ms) "
             "| blocked, async (ms) | per step, sync | per step, async |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name in ("gpt2-124m", "mlp-wide"):
        prof = inputs.synthetic_profile(name, args.mfu)
        nbytes = state_bytes(prof.parameters)
        for zero, prefetch, shard_size in ((0, False, None), (3, True, 8)):
            rows, _ = sweep(prof, cluster, [1024], ["weak"], args.algorithm, zero, 1, prefetch, shard_size)
            step_s = rows[-1]["step_s"]
            gather_s = collective_s("all-gather", nbytes, shard_size or 1024, cluster, args.algorithm)[0] if zero else 0
            interval_s = CHECKPOINT_EVERY * step_s
            sync = checkpoint_cost(nbytes, storage, False, gather_s)
            asyn = checkpoint_cost(nbytes, storage, True, gather_s, interval_s)
            label = f"{zero}{' + prefetch' if prefetch else ''}{f' + hybrid G {shard_size}' if shard_size else ''}"

            def share(cost):
                per_step = cost["blocked_s"] / CHECKPOINT_EVERY
                return f"{per_step * 1e3:.3f} ms ({per_step / step_s * 100:.2f}%)"

            lines.append(f"| {name} | {label} | {nbytes / 1e9:.2f} | {gather_s * 1e3:.1f} | {sync['copy_s'] * 1e3:.1f} "
                         f"| {sync['write_s'] * 1e3:.0f} | {sync['blocked_s'] * 1e3:.0f} | {asyn['blocked_s'] * 1e3:.0f} "
                         f"| {share(sync)} | {share(asyn)} |")
    return lines


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    command = "launch/scaling_model.py " + " ".join(sys.argv[1:] if argv is None else argv)
    check_outputs(args)
    if args.projection:
        lines, said = projection(args)
        text = ["# Scaling projection: GPT-2 124M and the wide MLP on H200s (model, not measured)", "",
                f"`{command}`", "", "Weak scaling (per-GPU batch fixed: GPT-2 8 x 1024 tokens, MLP 4096 rows), "
                "efficiency against 1 GPU.", ""] + lines + ["", "Assumptions:", ""] + [f"- {s}" for s in said]
        write_text(args.projection, "projection", "\n".join(text) + "\n")
        print("\n".join(text))
        return 0
    if args.trace:
        profile = inputs.profile_from_trace(inputs.load_trace(args.trace), args.trace)
    else:
        profile = inputs.synthetic_profile(args.synthetic, args.mfu)
    zero = profile.zero_stage if args.zero is None else args.zero
    accum = profile.micro_batches if args.grad_accum is None else args.grad_accum
    cluster, notes = load_cluster(args)
    modes = ["weak", "strong"] if args.mode == "both" else [args.mode]
    refused, checked = trainer_rules.refusals(args.ranks, modes, profile.rows, accum, zero, args.zero3_prefetch,
                                              args.zero_shard_size)
    rows, stops = sweep(profile, cluster, args.ranks, modes, args.algorithm, zero, accum, args.zero3_prefetch,
                        args.zero_shard_size, refused)
    for stop in stops:
        if "left out" in stop:
            print(f"scaling_model: {stop}", file=sys.stderr)
    if not rows:
        raise ModelError("ddp_train refuses every projected configuration (see above)")
    said = assumptions(profile, cluster, args, zero, accum, notes + checked + stops)
    text = ["# Scaling model", "", f"`{command}`", "", "Assumptions:", ""] + [f"- {s}" for s in said] + [""] + table(rows)
    print("\n".join(text))
    if args.md:
        write_text(args.md, "md", "\n".join(text) + "\n")
    if args.csv:
        write_csv(args.csv, rows)
    if args.png:
        write_png(args.png, rows, f"{profile.name} on {cluster.name}, ZeRO {zero}, {args.algorithm} (model)")
    return 0


def cli():
    try:
        return main()
    except ModelError as e:
        print(f"scaling_model: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"scaling_model: error: {e.filename or 'output'}: {e.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(cli())
