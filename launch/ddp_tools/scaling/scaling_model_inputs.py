"""scaling_model_inputs.py: what the scaling model reads: a ddp_train trace (format
"ddp_train trace 1", see the README), the synthetic models, cluster presets and files,
and bench_allreduce's Markdown table. Errors are ModelError with the file and field."""
import json
import os
import re
import statistics

from ddp_tools.common import tool_files
from ddp_tools.scaling import trace_exposure
from ddp_tools.scaling.scaling_model_core import Cluster, Link, ModelError, Profile, fit_alpha_beta, link_from_fit

# The trainer's defaults (ddp_train --help: --bucket-mb 25, --first-bucket-mb 1); tensors
# start 16-byte aligned (8 FP16 elements) in the flat layout (DESIGN.md).
BUCKET_BYTES, FIRST_BUCKET_BYTES, ALIGN_ELEMENTS = 25 << 20, 1 << 20, 8

# H200 figures, nominal (datasheet), not measured: dense FP16/BF16 Tensor Core 989 TFLOP/s,
# HBM3e 4.8 TB/s, host link PCIe Gen5 x16 64 GB/s per direction.
H200_FP16_FLOPS, H200_HBM_BPS, H200_PCIE_BPS = 989e12, 4.8e12, 64e9
# AdamW bytes moved per parameter: FP32 master, m and v read and written (24), the FP16
# gradient read (2) and the FP16 weight written (2). SGD and the unscale pass are not counted.
ADAMW_BYTES_PER_PARAM = 28

PRESETS = {
    # NVLink 4 on H200: 900 GB/s bidirectional per GPU, so 450 GB/s per direction; NDR
    # InfiniBand 400 Gb/s = 50 GB/s per direction, one NIC per GPU. Latency per ring step:
    # 3 us on NVLink, 8 us across IB (a hop plus NCCL's proxy); all nominal, not measured.
    "h200-8x-nvlink-ib": {"name": "h200-8x-nvlink-ib", "gpus_per_node": 8,
                          "intra": {"bandwidth_GBps": 450.0, "latency_us": 3.0},
                          "inter": {"bandwidth_GBps": 50.0, "latency_us": 8.0}},
    # This host (2 cores, Open MPI 4.1.4 shared memory, ddp_train's MpiCommunicator FP16
    # all-reduce): fit_alpha_beta on 2026-12-01 to two pooled runs of `mpirun -np 2
    # bench_allreduce --markdown --min-bytes 4K --max-bytes 16M`: a = 0 (the least-squares
    # intercept came out negative: the MiB sizes' noise dwarfs the ~7 us of a 4 KiB
    # all-reduce), bus bandwidth 0.59 GB/s (1 MiB and up ran at 0.45-1.6 GB/s; 256 KiB and
    # below up to 2.3 GB/s: the fit is for gradient buckets, not small messages). One host:
    # no inter-node level. Beyond 2 ranks it is oversubscribed, which the model ignores.
    # op_factors (2026-12-06, launch/results/2026-12-06-cpu-scaling-validation-zero.md): the
    # N = 2 traces time the last bucket's reduce-scatter (after backward, the compute idle)
    # at 1.9-2.6x the ring formula from the same run's all-reduce (Open MPI's
    # MPI_Reduce_scatter with our FP16 user op is no ring: about one all-reduce), in both
    # of the speeds this host's all-reduce showed that day (~2 and ~4 GB/s); the 2 MiB
    # all-gathers at 0.9-1.6x (left at 1: the ring formula).
    "cpu-host": {"name": "cpu-host", "gpus_per_node": 1 << 20,
                 "intra": {"bandwidth_GBps": 0.59, "latency_us": 0.0},
                 "inter": {"bandwidth_GBps": 0.59, "latency_us": 0.0},
                 "op_factors": {"reduce-scatter": 2.0},
                 # 2 cores: 4 ranks (one compute thread each) compute at half speed (the
                 # traces of 2026-12-06: 1.8-2.1x slower steps at N = 4 than at N = 1).
                 "cores_per_node": 2},
}


def cluster_from_dict(d, where):
    if not isinstance(d, dict):
        raise ModelError(f"{where}: expected a JSON object with name, gpus_per_node, intra and inter")
    try:
        intra, inter = d["intra"], d["inter"]
        name, gpus = str(d["name"]), int(d["gpus_per_node"])
        links = [(float(x["bandwidth_GBps"]) * 1e9, float(x["latency_us"]) * 1e-6) for x in (intra, inter)]
    except (KeyError, TypeError, ValueError) as e:
        raise ModelError(f"{where}: expected name, gpus_per_node, intra/inter bandwidth_GBps and latency_us ({e})")
    if gpus < 1:
        raise ModelError(f"{where}: gpus_per_node must be >= 1")
    factors = d.get("op_factors", {})
    try:
        factors = {str(op): float(f) for op, f in factors.items()}
    except (AttributeError, TypeError, ValueError):
        raise ModelError(f"{where}: op_factors must map reduce-scatter/all-gather to numbers")
    cores = d.get("cores_per_node")
    try:
        cores = None if cores is None else float(cores)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: cores_per_node must be a number")
    try:
        return Cluster(name, gpus, Link(*links[0]), Link(*links[1]), op_factors=factors, cores_per_node=cores)
    except ModelError as e:  # Link's own check, which does not know the file
        raise ModelError(f"{where}: {e}")


def load_cluster(spec):
    if spec in PRESETS:
        cluster = cluster_from_dict(PRESETS[spec], f"preset {spec}")
        cluster.source = ("fitted to bench_allreduce on this host, 2026-12-01" if spec == "cpu-host"
                          else "nominal datasheet figures, not measured")
        return cluster
    if not os.path.lexists(spec):
        raise ModelError(f"--cluster {spec}: not a preset ({', '.join(PRESETS)}) and no such file")
    try:
        d = json.loads(tool_files.read_text(spec, f"--cluster {spec}", tool_files.SMALL_INPUT_BYTES, "JSON"))
    except tool_files.FileError as e:
        raise ModelError(str(e))
    except json.JSONDecodeError as e:
        raise ModelError(f"--cluster {spec}: not JSON ({e.msg} at line {e.lineno})")
    cluster = cluster_from_dict(d, f"--cluster {spec}")
    cluster.source = f"from {spec}"
    return cluster


def read_allreduce_table(path):
    """(ranks, [(bytes, seconds)]) from `bench_allreduce --markdown`'s 'ours time (us)' column."""
    try:
        text = tool_files.read_text(path, f"--allreduce-table {path}", tool_files.SMALL_INPUT_BYTES,
                                    "a bench_allreduce table")
    except tool_files.FileError as e:
        raise ModelError(str(e))
    m = re.search(r"bench_allreduce: (\d+) rank", text)
    if not m:
        raise ModelError(f"--allreduce-table {path}: no '# bench_allreduce: N rank(s)' line")
    ranks, header, rows = int(m.group(1)), None, []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None and "size (B)" in cells and "ours time (us)" in cells:
            header = (cells.index("size (B)"), cells.index("ours time (us)"))
        elif header and cells and re.fullmatch(r"\d+", cells[0]):
            try:
                rows.append((float(cells[header[0]]), float(cells[header[1]]) * 1e-6))
            except (IndexError, ValueError):
                raise ModelError(f"--allreduce-table {path}: unreadable row '{line.strip()}'")
    if not rows:
        raise ModelError(f"--allreduce-table {path}: no table with 'size (B)' and 'ours time (us)' columns")
    return ranks, rows


def fit_table(path):
    ranks, rows = read_allreduce_table(path)
    alpha, beta = fit_alpha_beta(rows, ranks)
    return ranks, alpha, beta, link_from_fit(alpha, beta, ranks)


def _plan_buckets(tensors, bucket_bytes=BUCKET_BYTES, first_bytes=FIRST_BUCKET_BYTES):
    """comm/gradient_reducer.cpp's plan over (elements, ready_after_layer) in layout order:
    a bucket closes once its tensors' bytes (padding not counted) reach its cap; its bytes
    are its slice's (padding between its tensors counted)."""
    buckets, open_bytes, span, ready = [], 0, 0, None
    for elements, layer in tensors:
        padded = -(-elements // ALIGN_ELEMENTS) * ALIGN_ELEMENTS
        span += padded  # the slice ends at its last tensor's end: that one's padding is dropped below
        open_bytes += 2 * elements
        ready = layer if ready is None else min(ready, layer)
        if open_bytes >= (first_bytes if not buckets else bucket_bytes):
            buckets.append((2 * (span - padded + elements), ready))
            open_bytes, span, ready = 0, 0, None
    if open_bytes:
        buckets.append((2 * (span - padded + elements), ready))
    return buckets


def synthetic_profile(name, mfu=0.4, rows=None):
    """gpt2-124m or mlp-wide on an H200: per-layer GEMM FLOPs (forward 2mnk; backward twice
    that, the first Linear once: it computes no dX) at 989 TFLOP/s x mfu."""
    if not 0 < mfu <= 1:
        raise ModelError(f"--mfu {mfu}: expected a fraction in (0, 1]")
    flops_per_s = H200_FP16_FLOPS * mfu
    if name == "mlp-wide":
        widths, rows = [784, 8192, 8192, 8192, 10], rows or 4096
        fwd, bwd, tensors, layer_elements = [], [], [], []
        for i, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
            flops = 2 * rows * n_in * n_out
            fwd.append(flops / flops_per_s)
            bwd.append((1 if i == 0 else 2) * flops / flops_per_s)
            layer_elements.append([n_out * n_in, n_out])
        for i in reversed(range(len(layer_elements))):  # layout = backward order
            tensors += [(e, i) for e in layer_elements[i]]
        input_bytes = rows * widths[0] * 2
    elif name == "gpt2-124m":
        n_layer, c, vocab, t, rows = 12, 768, 50257, 1024, rows or 8
        tokens = rows * t
        block_flops = 24 * tokens * c * c + 4 * tokens * t * c  # GEMMs + QK^T and AV (unmasked)
        head_flops = 2 * tokens * c * vocab
        fwd = [0.0] + [block_flops / flops_per_s] * n_layer + [head_flops / flops_per_s]
        bwd = [2 * s for s in fwd]
        block = [4 * c * c, c, 4 * c * c, 4 * c, c, c, c * c, c, 3 * c * c, 3 * c, c, c]
        layer_elements = [[t * c, vocab * c]] + [block] * n_layer + [[c, c, vocab * c]]  # wte tied
        tensors = [(c, n_layer + 1), (c, n_layer + 1)]
        for i in range(n_layer, 0, -1):
            tensors += [(e, i) for e in block]
        tensors += [(t * c, 0), (vocab * c, 0)]
        input_bytes = tokens * 4 * 2  # int32 inputs and targets
    else:
        raise ModelError(f"--synthetic {name}: expected gpt2-124m or mlp-wide")
    parameters = sum(e for e, _ in tensors)
    layer_bytes = [2 * sum(-(-e // ALIGN_ELEMENTS) * ALIGN_ELEMENTS for e in es) for es in layer_elements]
    return Profile(name, fwd, bwd, _plan_buckets(tensors), layer_bytes, rows, 1, 0, parameters,
                   upload_s=input_bytes / H200_PCIE_BPS,
                   optimizer_s=ADAMW_BYTES_PER_PARAM * parameters / H200_HBM_BPS)


def load_trace(path):
    try:
        trace = json.loads(tool_files.read_bytes(path, f"--trace {path}"))
    except tool_files.FileError as e:
        raise ModelError(str(e))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelError(f"--trace {path}: not JSON ({getattr(e, 'msg', e)})")
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise ModelError(f"--trace {path}: no traceEvents list (not a Chrome trace)")
    other = trace.get("otherData")
    if not isinstance(other, dict) or not str(other.get("format", "")).startswith("ddp_train trace"):
        raise ModelError(f"--trace {path}: otherData.format is not 'ddp_train trace 1'")
    return trace


def rank_events(trace, rank=None):
    """Complete ('X') events and instants ('i', dur 0) of one rank: otherData.rank's, or pid
    `rank` of a merged file."""
    events = [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("ph") in ("X", "i")]
    for e in events:
        if e["ph"] == "i":
            e.setdefault("dur", 0.0)
        if not (isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float))
                and isinstance(e.setdefault("args", {}), dict)):
            raise ModelError(f"event '{e.get('name', '?')}' has no numeric ts/dur or no args object")
    pids = {e.get("pid") for e in events}
    if len(pids) > 1:
        want = rank if rank is not None else 0
        events = [e for e in events if e.get("pid") == want]
    return events


def steps_of(events, path):
    steps = sorted({e["args"]["step"] for e in events if e.get("cat") == "step" and "step" in e.get("args", {})})
    if not steps:
        raise ModelError(f"--trace {path}: no 'step' events")
    return steps[1:] if len(steps) > 1 else steps  # the first traced step warms up


def _median(values, default=0.0):
    return statistics.median(values) if values else default


def profile_from_trace(trace, path, rank=None, shard_size=None):
    """One rank's step from its trace: per-layer forward and backward medians, the bucket plan,
    where each bucket became ready, upload, optimizer and other (the step's time outside those
    spans and outside its waits for communication: the comm_wait spans and, at --zero >= 1,
    the layers' waits for their weights, trace_exposure.layer_waits). A trace of --zero >= 1
    timed the optimizer on a 1/G range: it is scaled back to the whole (shard_size G: the
    run's --zero-shard-size, default otherData's zero_shard_size, else the world)."""
    other = trace["otherData"]
    try:
        rows, micro = float(other["batch_per_rank"]), int(other["micro_batches"])
        zero, params = int(other["zero_stage"]), int(other["parameters"])
        buckets = [(float(b["bytes"]), int(b["ready_after_layer"])) for b in other["buckets"]]
    except (KeyError, TypeError, ValueError) as e:
        raise ModelError(f"--trace {path}: otherData lacks or garbles {e} (batch_per_rank, micro_batches, "
                         "zero_stage, parameters, buckets[].bytes/ready_after_layer)")
    try:
        events = rank_events(trace, rank)
    except ModelError as e:
        raise ModelError(f"--trace {path}: {e}")
    kept = set(steps_of(events, path))
    mine = [e for e in events if e.get("args", {}).get("step") in kept]

    def durations(cat, layer=None):
        return [e["dur"] * 1e-6 for e in mine if e.get("cat") == cat
                and (layer is None or e["args"].get("layer") == layer)]

    n_layers = len(other.get("layers") or []) or 1 + max(
        (e["args"].get("layer", -1) for e in mine if e.get("cat") == "forward"), default=-1)
    if n_layers <= 0:
        raise ModelError(f"--trace {path}: no layers (otherData.layers or forward events)")
    fwd = [_median(durations("forward", i)) for i in range(n_layers)]
    bwd = [_median(durations("backward", i)) for i in range(n_layers)]
    per_step = {s: {"step": 0.0, "parts": 0.0, "optimizer": 0.0} for s in kept}
    for e in mine:
        acc, cat = per_step[e["args"]["step"]], e.get("cat")
        if cat == "step":
            acc["step"] += e["dur"] * 1e-6
        elif cat in ("upload", "forward", "backward", "comm_wait", "optimizer") and e.get("tid", 0) == 0:
            acc["parts"] += e["dur"] * 1e-6
            if cat == "optimizer":
                acc["optimizer"] += e["dur"] * 1e-6
    waits = trace_exposure.layer_waits(events, sorted(kept), zero, buckets, micro)
    other_s = max(0.0, _median([a["step"] - a["parts"] - waits[s] for s, a in per_step.items()]))
    layer_bytes = _layer_bytes(other, mine, buckets, n_layers)
    shards = 1
    if zero >= 1:
        try:
            shards = int(shard_size or other.get("zero_shard_size") or other.get("world_size") or 1)
        except (TypeError, ValueError):
            raise ModelError(f"--trace {path}: otherData.zero_shard_size or world_size is not an integer")
    prof = Profile(f"trace {path}", fwd, bwd, buckets, layer_bytes, rows, micro, zero, params,
                   upload_s=_median(durations("upload")),
                   optimizer_s=_median([a["optimizer"] for a in per_step.values()]) * max(1, shards),
                   other_s=other_s, ready_fraction=_ready_fractions(mine, buckets))
    prof.measured_step_s = _median([a["step"] for a in per_step.values()])
    return prof


def _ready_fractions(events, buckets):
    """Per bucket, the median over steps of where in its ready layer's (last) backward its
    bucket_ready instant falls, in [0, 1]; 1.0 without instants (older traces)."""
    last_bwd = {}  # (step, layer) -> the micro-batches' last backward span of that layer
    for e in events:
        if e.get("cat") == "backward":
            key = (e["args"].get("step"), e["args"].get("layer"))
            if key not in last_bwd or e["ts"] > last_bwd[key]["ts"]:
                last_bwd[key] = e
    found = {}
    for e in events:
        a = e.get("args", {})
        if e.get("cat") != "bucket_ready" or not 0 <= a.get("bucket", -1) < len(buckets):
            continue
        span = last_bwd.get((a.get("step"), buckets[a["bucket"]][1]))
        if span and span["dur"] > 0:
            found.setdefault(a["bucket"], []).append(min(1.0, max(0.0, (e["ts"] - span["ts"]) / span["dur"])))
    return [_median(found[b]) if b in found else 1.0 for b in range(len(buckets))]


def _layer_bytes(other, events, buckets, n_layers):
    """Per layer FP16 weight bytes: otherData.layers[].bytes if the trainer writes it, else
    the ZeRO-3 gathers' bytes in the trace, else each bucket's bytes spread evenly over the
    layers it can span (its ready layer up to the previous bucket's): the total is exact,
    the split approximate (it matters only with --zero3-prefetch)."""
    layers = other.get("layers") or []
    if len(layers) == n_layers and all(isinstance(l, dict) and "bytes" in l for l in layers):
        return [float(l["bytes"]) for l in layers]
    per_step = {}  # (step, layer) -> bytes gathered: a layer of several runs (a GPT's tied head) has one gather each
    for e in events:
        a = e.get("args", {})
        if e.get("cat") == "comm" and a.get("op") == "all-gather" and "layer" in a:
            key = (a.get("step"), a["layer"])
            per_step[key] = per_step.get(key, 0.0) + float(a.get("bytes", 0))
    gathered = {}
    for (_, layer), nbytes in sorted(per_step.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1])):
        gathered.setdefault(layer, nbytes / 2)  # each step gathers a layer twice: before forward and backward
    if len(gathered) == n_layers:
        return [gathered[i] for i in range(n_layers)]
    out, upper = [0.0] * n_layers, n_layers - 1
    for nbytes, ready in buckets:
        span = list(range(ready, max(upper, ready) + 1))
        for i in span:
            out[i] += nbytes / len(span)
        upper = ready - 1 if ready > 0 else 0
    return out
