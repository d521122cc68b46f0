"""trace_exposure.py: what one rank's ddp_train trace (N >= 2) measured per step: the step
time, the collectives' time, the communication exposed on the compute thread, each
gradient bucket's exposure and each collective's duration; and the layers' waits for
their weights, which a profile of the trace must not count as compute.

Exposed communication is the compute thread waiting for a collective:
  - the `comm_wait` spans (the end of backward: the gradients' collectives);
  - ZeRO-3: the gap before each layer's forward or backward span while the gather it
    needs runs: the k-th layer span of a step needs the step's k-th gather (a layer of
    several gathered tensors, the GPT's tied head, is several all-gathers in a row);
  - ZeRO 1 and 2: the gap before a forward span while the chunk of the previous step's
    updated weights it needs is gathered (the chunks are the gradient buckets' ranges,
    the first layers' first; layer l needs bucket b's, b the first bucket whose ready
    layer is <= l, and every chunk before it: one FIFO).
A gap is measured from the end of the compute thread's previous span (so the hook's
own bookkeeping, microseconds, counts too) up to the end of the collective it waited
for, and no further than the span's start. Standard library only; events are
scaling_model_inputs.rank_events' (ts and dur in microseconds).
"""
import statistics

# The compute thread's spans that are work, not waiting: everything on tid 0 but these.
NOT_WORK = ("step", "comm_wait", "bucket_ready")


def _us(x):
    return x * 1e-6


def _by_step(events, kept):
    out = {s: [] for s in kept}
    for e in events:
        s = e.get("args", {}).get("step")
        if s in out:
            out[s].append(e)
    return out


def _work_spans(events):
    return sorted((e for e in events if e.get("ph") == "X" and e.get("tid", 0) == 0
                   and e.get("cat") not in NOT_WORK), key=lambda e: e["ts"])


def _gap_wait(spans, span, needed_end):
    """The wait before `span` for a collective ending at needed_end: from the previous
    work span's end (or the span's own start if it is the first) to needed_end, clipped."""
    i = spans.index(span)
    gap_start = spans[i - 1]["ts"] + spans[i - 1]["dur"] if i > 0 else span["ts"]
    return max(0.0, min(needed_end, span["ts"]) - gap_start)


def layer_gather_runs(step_events, micro_batches):
    """ZeRO-3: the step's layer gathers in issue order, each a list of the all-gathers (in
    a row) of one layer's tensors: a layer gathered with g all-gathers per gather shows
    2 x micro_batches x g of them (before forward and backward, each micro-batch)."""
    ops = sorted((e for e in step_events if e.get("cat") == "comm" and e["args"].get("op") == "all-gather"
                  and "layer" in e["args"]), key=lambda e: e["ts"])
    count = {}
    for e in ops:
        count[e["args"]["layer"]] = count.get(e["args"]["layer"], 0) + 1
    runs, i = [], 0
    while i < len(ops):
        layer = ops[i]["args"]["layer"]
        size = max(1, count[layer] // (2 * max(1, micro_batches)))
        run = ops[i:i + size]
        if any(e["args"]["layer"] != layer for e in run):  # not the pattern above: one op per run
            run = ops[i:i + 1]
        runs.append(run)
        i += len(run)
    return runs


def update_chunks(step_events):
    """ZeRO 1/2: the all-gathers of the updated weights a step started (no layer), in order."""
    return sorted((e for e in step_events if e.get("cat") == "comm" and e["args"].get("op") == "all-gather"
                   and "layer" not in e["args"]), key=lambda e: e["ts"])


def chunk_of_layer(layer, buckets, chunks):
    """The chunk (an event of update_chunks) layer `layer`'s forward waits for: the chunks
    are the buckets' ranges in forward order (the last bucket first), matched by bytes
    (a chunk between buckets, padding, matches none and is passed over)."""
    need = next((b for b, (_, ready) in enumerate(buckets) if ready <= layer), len(buckets) - 1)
    want = list(reversed(range(len(buckets))))
    k, found = 0, None
    for c in chunks:
        if k < len(want) and abs(float(c["args"].get("bytes", -1)) - buckets[want[k]][0]) < 0.5:
            if want[k] == need:
                found = c
                break
            k += 1
    return found if found is not None else (chunks[-1] if chunks else None)


def layer_waits(events, kept, zero_stage, buckets, micro_batches):
    """Per kept step, the seconds the compute thread waited before its layers for weights
    (ZeRO-3 gathers, ZeRO 1/2 chunks of the updated weights); 0 at ZeRO 0."""
    out = {s: 0.0 for s in kept}
    if zero_stage == 0:
        return out
    everything = _by_step(events, set(kept) | {s - 1 for s in kept})
    for s in kept:
        spans = _work_spans(everything[s])
        layers = [e for e in spans if e.get("cat") in ("forward", "backward")]
        total = 0.0
        if zero_stage == 3:
            runs = layer_gather_runs(everything[s], micro_batches)
            for span, run in zip(layers, runs):
                total += _gap_wait(spans, span, max(e["ts"] + e["dur"] for e in run))
        else:
            chunks = update_chunks(everything.get(s - 1, []))
            if chunks:
                for span in layers:
                    if span.get("cat") != "forward":
                        continue
                    chunk = chunk_of_layer(span["args"].get("layer", 0), buckets, chunks)
                    total += _gap_wait(spans, span, chunk["ts"] + chunk["dur"])
        out[s] = _us(total)
    return out


def collective_costs(events, kept, micro_batches):
    """Per op kind, the median duration (s) over the kept steps of the step's k-th
    collective of that kind (ZeRO-3's multi-tensor layer gathers summed into one), in the
    order they ran: what simulate_step's measured_costs takes."""
    per_step = _by_step(events, kept)
    lists = []
    for s in kept:
        comm = sorted((e for e in per_step[s] if e.get("cat") == "comm"), key=lambda e: e["ts"])
        runs = {id(r[0]): r for r in layer_gather_runs(per_step[s], micro_batches)}
        in_run = {id(e) for r in runs.values() for e in r[1:]}
        kinds = {}
        for e in comm:
            if id(e) in in_run:
                continue
            dur = sum(x["dur"] for x in runs[id(e)]) if id(e) in runs else e["dur"]
            kinds.setdefault(e["args"].get("op", e.get("name", "?")), []).append(_us(dur))
        lists.append(kinds)
    out = {}
    for op in {op for k in lists for op in k}:
        count = min(len(k.get(op, [])) for k in lists)
        out[op] = [statistics.median(k[op][i] for k in lists) for i in range(count)]
    return out


def measure(events, kept, zero_stage, buckets, micro_batches, path):
    """Medians over the kept steps: step, comm (the step's collectives' time), exposed
    (comm_wait + the layers' waits), layer_waits, hidden (1 - exposed/comm, at least 0),
    ready_to_update (the last bucket_ready instant to the optimizer's start), buckets (each
    bucket's collective time after the step's last backward), costs (collective_costs). Raises
    ValueError when the trace holds no collectives (N = 1)."""
    waits = layer_waits(events, kept, zero_stage, buckets, micro_batches)
    per = {s: {"step": 0.0, "exposed": waits[s], "comm": 0.0, "bwd_end": 0.0, "buckets": {}, "ready": None,
               "update": None} for s in kept}
    for e in events:
        s = e.get("args", {}).get("step")
        if s not in per:
            continue
        acc, cat, end = per[s], e.get("cat"), e["ts"] + e["dur"]
        if cat == "step":
            acc["step"] += _us(e["dur"])
        elif cat == "comm_wait":
            acc["exposed"] += _us(e["dur"])
        elif cat == "comm":
            acc["comm"] += _us(e["dur"])
            if "bucket" in e["args"]:
                acc["buckets"][e["args"]["bucket"]] = (e["ts"], end)
        elif cat == "backward":
            acc["bwd_end"] = max(acc["bwd_end"], end)
        elif cat == "bucket_ready":
            acc["ready"] = max(acc["ready"] or e["ts"], e["ts"])
        elif cat == "optimizer":
            acc["update"] = min(acc["update"] or e["ts"], e["ts"])
    if not any(a["comm"] for a in per.values()):
        raise ValueError(f"{path}: no 'comm' events (is it a trace of N >= 2 ranks?)")
    med = statistics.median
    out = {k: med([a[k] for a in per.values()]) for k in ("step", "exposed", "comm")}
    out["layer_waits"] = med(list(waits.values()))
    # From the last gradient bucket's ready instant to the optimizer's start: the collectives'
    # tail, however the compute thread spent it (waiting, or its last layer stretched by the
    # communication thread taking its core: on an oversubscribed host no wait shows).
    tails = [_us(a["update"] - a["ready"]) for a in per.values() if a["ready"] is not None and a["update"] is not None]
    out["ready_to_update"] = med(tails) if tails else float("nan")
    n_buckets = max(len(a["buckets"]) for a in per.values())
    out["buckets"] = [med([max(0.0, _us(a["buckets"][b][1] - max(a["buckets"][b][0], a["bwd_end"])))
                           for a in per.values() if b in a["buckets"]]) for b in range(n_buckets)]
    out["hidden"] = max(0.0, 1 - out["exposed"] / out["comm"]) if out["comm"] > 0 else 1.0
    out["costs"] = collective_costs(events, kept, micro_batches)
    return out
