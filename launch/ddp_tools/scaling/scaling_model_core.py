"""scaling_model_core.py: the arithmetic of the scaling model (no I/O, standard library only).

Collective costs (alpha-beta, after Thakur, Rabenseifner and Gropp, "Optimization of
Collective Communication Operations in MPICH", IJHPCA 19(1), 2005; the tree after
NVIDIA's "Massively Scale Your Deep Learning Training with NCCL 2.4", 2019), with
alpha the latency of one step (s) and bw the bandwidth per rank per direction (B/s):

  ring all-reduce       2(N-1) alpha + 2(N-1)/N B/bw   (reduce-scatter then all-gather)
  ring reduce-scatter   (N-1) alpha  + (N-1)/N B/bw    (and all-gather: the same)
  tree all-reduce       2 ceil(log2 N) alpha + 2 B/bw
      NCCL's double binary tree, pipelined: each of the two trees carries B/2; a rank
      is interior in one tree (receives B/2 from each of 2 children, sends B/2 to each
      of them on the way down) and a leaf in the other, so each link direction carries
      2 x B/2 + 2 x B/2 = 2B in all, and a chunk climbs and descends ceil(log2 N) levels.
  hierarchical (N > G GPUs per node, M = ceil(N/G) nodes): intra-node reduce-scatter
      of B over G, inter-node all-reduce of B/G over M (ring or tree; each GPU's own
      NIC), intra-node all-gather of B over G; phases summed (not pipelined: pessimistic).
  'auto' takes the faster of ring and tree per collective, as NCCL's tuner does from
  its own model. Reduce-scatter and all-gather are rings (NCCL has no tree for them),
  times the cluster's op factor where its transport's are not (Open MPI on one host).
  hybrid sharding (groups of G): reduce-scatter over G, then the all-reduce of B/G across
  the N/G groups (the inter link across nodes; on one node the groups share the links,
  so a measured table is read at the world's N).

The step simulation (simulate_step) is the trainer's schedule: backward from the last
layer to layer 0; a bucket's collective starts once its ready_after_layer's backward made
it ready (Profile.ready_fraction of the way through: the layer's end unless a trace says)
and the previous collective ended (one FIFO communication stream); ZeRO-3 gathers
(issued --zero-prefetch layers ahead) and ZeRO 1/2's chunked gathers of the updated
weights (under the next forward) go through the same FIFO. Where CPU ranks outnumber a
node's cores (Cluster.cores_per_node), compute slows by ranks/cores.
"""
import math


class ModelError(Exception):
    """Bad input: a one-line message naming the file, flag or field."""


ALGORITHMS = ("ring", "tree", "auto")


class Link:
    def __init__(self, bandwidth_Bps, latency_s):
        # Written so that NaN fails too (every comparison with it is false).
        if not (0 < bandwidth_Bps < math.inf and 0 <= latency_s < math.inf):
            raise ModelError("a link needs a finite bandwidth > 0 and latency >= 0")
        self.bandwidth_Bps = float(bandwidth_Bps)
        self.latency_s = float(latency_s)


OP_FACTOR_OPS = ("reduce-scatter", "all-gather")


class Cluster:
    """gpus_per_node ranks share the intra link; 'fitted' maps a bench_allreduce table's N to
    the (per-step latency, bus bandwidth) fitted from it, used flat for any N up to it.
    op_factors: what a reduce-scatter or an all-gather costs against the ring formula from
    the same link (which all-reduce tables measure): 1 where the transport runs them as
    rings (NCCL); Open MPI's MPI_Reduce_scatter with a user-defined op is not one.
    cores_per_node: where ranks are CPU processes sharing C cores (one compute thread each,
    --threads 1), a node of more ranks than cores computes at C/ranks of the speed; None
    (GPUs, or a core per rank): compute does not depend on N."""

    def __init__(self, name, gpus_per_node, intra, inter, fitted=None, op_factors=None, cores_per_node=None):
        self.name, self.gpus_per_node, self.source = name, int(gpus_per_node), "given"
        self.intra, self.inter = intra, inter
        if cores_per_node is not None and not (1 <= cores_per_node < math.inf):
            raise ModelError("cores_per_node: expected a number >= 1")
        self.cores_per_node = cores_per_node
        self.fitted = dict(fitted or {})
        self.op_factors = dict(op_factors or {})
        for op, f in self.op_factors.items():
            if op not in OP_FACTOR_OPS or not (0 < f < math.inf):
                raise ModelError(f"op_factors: expected {' or '.join(OP_FACTOR_OPS)} with a finite factor > 0")

    def compute_slowdown(self, ranks):
        """How much slower a rank computes at N = ranks than alone (>= 1)."""
        if not self.cores_per_node:
            return 1.0
        return max(1.0, min(ranks, self.gpus_per_node) / self.cores_per_node)

    def fitted_link(self, ranks):
        covering = [n for n in self.fitted if n >= ranks]
        return (min(covering), Link(*self.fitted[min(covering)])) if covering else (None, None)


def ring_allreduce_s(nbytes, ranks, link):
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) * link.latency_s + 2 * (ranks - 1) / ranks * nbytes / link.bandwidth_Bps


def ring_half_s(nbytes, ranks, link):
    """Reduce-scatter or all-gather of B bytes (the whole buffer's size) over ranks."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1) * link.latency_s + (ranks - 1) / ranks * nbytes / link.bandwidth_Bps


def tree_allreduce_s(nbytes, ranks, link):
    if ranks <= 1:
        return 0.0
    return 2 * math.ceil(math.log2(ranks)) * link.latency_s + 2 * nbytes / link.bandwidth_Bps


def flat_allreduce(nbytes, ranks, link, algorithm):
    ring, tree = ring_allreduce_s(nbytes, ranks, link), tree_allreduce_s(nbytes, ranks, link)
    if algorithm == "ring" or (algorithm == "auto" and ring <= tree):
        return ring, "ring"
    return tree, "tree"


def collective_s(op, nbytes, ranks, cluster, algorithm="auto", busy_ranks=None):
    """(seconds, algorithm used) of one collective of nbytes (the full buffer) over ranks,
    times the cluster's op factor for a reduce-scatter or an all-gather. busy_ranks: how
    many ranks use the same links at once (hybrid sharding's groups on one node all run
    their collectives together): a measured table is taken at that N, not at `ranks`."""
    seconds, used = _collective_s(op, nbytes, ranks, cluster, algorithm, max(ranks, busy_ranks or ranks))
    return seconds * cluster.op_factors.get(op, 1.0), used


def _collective_s(op, nbytes, ranks, cluster, algorithm, busy_ranks):
    if algorithm not in ALGORITHMS:
        raise ModelError(f"--algorithm {algorithm}: expected ring, tree or auto")
    if ranks <= 1:
        return 0.0, "none"
    table_ranks, fitted = cluster.fitted_link(busy_ranks)
    if fitted is not None:  # measured: whatever the library chose, fitted as a ring
        if op == "all-reduce":
            return ring_allreduce_s(nbytes, ranks, fitted), f"measured@{table_ranks}"
        return ring_half_s(nbytes, ranks, fitted), f"measured@{table_ranks}"
    per_node = cluster.gpus_per_node
    if ranks <= per_node:
        if op == "all-reduce":
            return flat_allreduce(nbytes, ranks, cluster.intra, algorithm)
        return ring_half_s(nbytes, ranks, cluster.intra), "ring"
    nodes = math.ceil(ranks / per_node)
    intra = ring_half_s(nbytes, per_node, cluster.intra)
    shard = nbytes / per_node
    if op == "all-reduce":
        inter, used = flat_allreduce(shard, nodes, cluster.inter, algorithm)
        return 2 * intra + inter, "hier-" + used
    return intra + ring_half_s(shard, nodes, cluster.inter), "hier-ring"


def replica_allreduce_s(nbytes, replicas, ranks, cluster, algorithm="auto"):
    """(seconds, algorithm) of hybrid sharding's second phase: the all-reduce of a group's
    1/G shard (nbytes) across the `replicas` groups of a world of `ranks`. Above one node
    the replicas of a shard sit on different nodes: each rank's own NIC, the inter link. On
    one node they share the group's links (intra), and a measured table that covers the
    world replaces the figures as it does for every collective (the replica all-reduce is
    the same MPI or NCCL all-reduce, run by every group at once)."""
    if ranks <= cluster.gpus_per_node or cluster.fitted_link(ranks)[1] is not None:
        return collective_s("all-reduce", nbytes, replicas, cluster, algorithm, busy_ranks=one_node_busy(ranks, cluster))
    return flat_allreduce(nbytes, replicas, cluster.inter, algorithm)


def one_node_busy(ranks, cluster):
    """Hybrid sharding on one node: every group's collective shares the node's links with the
    others' (one host's memory and cores; the same NVSwitch), so a measured table is read at
    the world's N. Across nodes, each group's links are its own (None)."""
    return ranks if ranks <= cluster.gpus_per_node else None


def bytes_sent_per_rank(op, nbytes, ranks):
    """What one rank sends in a ring (bandwidth-optimal) collective: the volume the
    trainer's log counts; a tree sends about as much (2B vs 2(N-1)/N B)."""
    if ranks <= 1:
        return 0.0
    factor = 2 if op == "all-reduce" else 1
    return factor * (ranks - 1) / ranks * nbytes


class Profile:
    """One rank's step, per micro-batch of `rows` samples: per-layer forward and backward
    seconds, the bucket plan (bytes, ready_after_layer) in start order, per-layer FP16 weight
    bytes (ZeRO-3 gathers), upload (per micro-batch), optimizer (per step, unsharded) and
    other (per step: the traced step's time outside the traced parts, held constant)."""

    def __init__(self, name, forward_s, backward_s, buckets, layer_bytes, rows, micro_batches=1,
                 zero_stage=0, parameters=0, upload_s=0.0, optimizer_s=0.0, other_s=0.0, ready_fraction=None):
        if len(forward_s) != len(backward_s) or not forward_s:
            raise ModelError(f"{name}: per-layer forward and backward times differ in count or are empty")
        if len(layer_bytes) != len(forward_s):
            raise ModelError(f"{name}: {len(layer_bytes)} layer sizes for {len(forward_s)} layers")
        for b, (nbytes, layer) in enumerate(buckets):
            if not 0 <= layer < len(forward_s) or nbytes < 0:
                raise ModelError(f"{name}: bucket {b} is ready after layer {layer}, which does not exist")
        self.name = name
        self.forward_s, self.backward_s = list(forward_s), list(backward_s)
        self.buckets, self.layer_bytes = list(buckets), list(layer_bytes)
        self.rows, self.micro_batches, self.zero_stage = rows, int(micro_batches), int(zero_stage)
        self.parameters = parameters
        self.upload_s, self.optimizer_s, self.other_s = upload_s, optimizer_s, other_s
        # Per bucket: how far into its ready layer's backward the reducer starts it (a trace's
        # bucket_ready instants: the MLP's weight gradients come before its input gradient);
        # 1.0 (the layer's end) where not measured.
        self.ready_fraction = list(ready_fraction) if ready_fraction is not None else [1.0] * len(self.buckets)
        if len(self.ready_fraction) != len(self.buckets) or not all(0.0 <= f <= 1.0 for f in self.ready_fraction):
            raise ModelError(f"{name}: ready fractions must be one in [0, 1] per bucket")

    def gradient_bytes(self):
        return sum(nbytes for nbytes, _ in self.buckets)


class StepResult:
    def __init__(self, **fields):
        self.__dict__.update(fields)


def simulate_step(profile, ranks, cluster, algorithm="auto", zero=0, grad_accum=1, rows=None,
                  zero3_prefetch=0, measured_costs=None, shard_size=None, overlap_update_gathers=True):
    """One optimizer step at `ranks` ranks, `rows` samples per micro-batch per rank (compute
    linear in rows), grad_accum micro-batches; returns a StepResult.

    zero3_prefetch: the trainer's --zero-prefetch depth D at --zero 3 (False/True are 0/1):
    the step's layer gathers, forward 0 .. L-1 then backward L-1 .. 0, are issued at the
    hook of the gather D places before them (the k-th layer's hook starts gathers k .. k+D)
    and each layer waits for its own; 0 issues each at its own hook. overlap_update_gathers
    (--zero 1/2; the trainer's default since 2026-12-06, off under --cuda-graph): the
    updated FP16 weights are all-gathered chunk by chunk (the buckets' ranges, the first
    layers' first) as the step ends, and each layer's next forward waits for its own chunk;
    in the steady state simulated here, the previous step's chunks are issued as this step
    starts. False: one all-gather after the update, exposed whole.

    measured_costs: the seconds of the collectives, replacing the alpha-beta costs (the
    validation's check of the schedule arithmetic alone, with the durations a trace
    measured): a list in issue order, or a dict from op ("all-reduce", "reduce-scatter",
    "all-gather") to that op's durations in issue order. shard_size G (hybrid sharding,
    FSDP's HSDP, at --zero >= 1; None or >= ranks: the whole world): the state is sharded
    within groups of G consecutive ranks, so the all-gathers run over G ranks, and a
    gradient bucket is reduce-scattered within the group, then its 1/G shard all-reduced
    across the ranks/G groups (inter-node where the groups span nodes; on one node, or with
    a measured table, the same links as the group's); the optimizer's work is divided by G."""
    if zero not in (0, 1, 2, 3):
        raise ModelError(f"--zero {zero}: expected 0, 1, 2 or 3")
    if grad_accum < 1:
        raise ModelError(f"--grad-accum {grad_accum}: expected >= 1")
    depth = int(zero3_prefetch)
    if depth < 0:
        raise ModelError(f"--zero-prefetch {zero3_prefetch}: expected >= 0")
    rows = profile.rows if rows is None else rows
    slow = cluster.compute_slowdown(ranks)  # ranks sharing too few cores (cpu-host); 1 on GPUs
    scale = rows / profile.rows * slow
    fwd = [s * scale for s in profile.forward_s]
    bwd = [s * scale for s in profile.backward_s]
    upload = profile.upload_s * scale
    layers = len(fwd)
    group = ranks if zero == 0 or not shard_size or shard_size >= ranks else int(shard_size)
    if group < 1:
        raise ModelError(f"--zero-shard-size {shard_size}: expected >= 1")
    state = {"t": 0.0, "comm_free": 0.0, "comm": 0.0, "exposed": 0.0, "sent": 0.0}
    ops, used, issued_of = [], set(), {}

    def cost_of(op, nbytes):
        """(seconds, algorithm, bytes one rank sends) of one of the step's collectives."""
        if group == ranks:
            cost, how = collective_s(op, nbytes, ranks, cluster, algorithm)
            return cost, how, bytes_sent_per_rank(op, nbytes, ranks)
        cost, how = collective_s(op, nbytes, group, cluster, algorithm, busy_ranks=one_node_busy(ranks, cluster))
        how = f"{how} in G"
        sent = bytes_sent_per_rank(op, nbytes, group)
        if op == "reduce-scatter":  # then the shard across the groups
            groups = math.ceil(ranks / group)
            across, across_how = replica_allreduce_s(nbytes / group, groups, ranks, cluster, algorithm)
            cost, how = cost + across, f"{how}, {across_how} across"
            sent += bytes_sent_per_rank("all-reduce", nbytes / group, groups)
        return cost, how, sent

    def measured(op):
        if isinstance(measured_costs, dict):
            done = issued_of.get(op, 0)
            issued_of[op] = done + 1
            mine = measured_costs.get(op, [])
            return mine[done] if done < len(mine) else None
        return measured_costs[len(ops)] if measured_costs is not None and len(ops) < len(measured_costs) else None

    def issue(op, nbytes, at):
        cost, how, sent = cost_of(op, nbytes)
        state["sent"] += sent
        seen = measured(op)
        if seen is not None:
            cost, how = seen, "measured"
        start = max(at, state["comm_free"])
        state["comm_free"] = start + cost
        state["comm"] += cost
        ops.append((op, nbytes))
        if cost > 0:
            used.add(how)
        return start, start + cost

    def wait(until):
        if until > state["t"]:
            state["exposed"] += until - state["t"]
            state["t"] = until

    # ZeRO-3's gathers of a micro-batch, in the order the layers use them; ZeRO 1/2's
    # chunks of the updated weights (the buckets' ranges in forward order) and, per layer,
    # the chunk its forward waits for (that of the first bucket whose ready layer is <= it).
    gather_order = [("fwd", i) for i in range(layers)] + [("bwd", i) for i in reversed(range(layers))]
    chunked = zero in (1, 2) and overlap_update_gathers and profile.buckets
    if chunked:
        chunk_of_layer = [next((len(profile.buckets) - 1 - b for b, (_, ready) in enumerate(profile.buckets)
                                if ready <= layer), len(profile.buckets) - 1) for layer in range(layers)]
        chunk_ends = [issue("all-gather", nbytes, 0.0)[1] for nbytes, _ in reversed(profile.buckets)]
    grad_op = "all-reduce" if zero == 0 else "reduce-scatter"
    bucket_times, last_ready = [], 0.0
    for micro in range(grad_accum):
        last = micro == grad_accum - 1
        state["t"] += upload
        gathered, next_gather = [], 0

        def use_layer(k):
            """The k-th layer of gather_order is next: start the gathers up to k + depth, wait for k's."""
            nonlocal next_gather
            while next_gather <= min(k + depth, len(gather_order) - 1):
                gathered.append(issue("all-gather", profile.layer_bytes[gather_order[next_gather][1]], state["t"])[1])
                next_gather += 1
            wait(gathered[k])

        for layer in range(layers):
            if zero == 3:
                use_layer(layer)
            elif chunked and micro == 0:
                wait(chunk_ends[chunk_of_layer[layer]])
            state["t"] += fwd[layer]
        next_bucket, issued_at = 0, 0.0
        for layer in range(layers - 1, -1, -1):
            if zero == 3:
                use_layer(2 * layers - 1 - layer)
            layer_start = state["t"]
            state["t"] += bwd[layer]
            # The reducer starts, in order, every bucket whose segments are all final: its own
            # once the layer's backward has made it ready, one held up by an earlier bucket
            # with that bucket.
            while last and next_bucket < len(profile.buckets) and profile.buckets[next_bucket][1] >= layer:
                nbytes, ready = profile.buckets[next_bucket]
                at = layer_start + profile.ready_fraction[next_bucket] * bwd[layer] if ready == layer else issued_at
                issued_at = max(at, issued_at)
                last_ready = issued_at
                start, end = issue(grad_op, nbytes, issued_at)
                bucket_times.append((start, end))
                next_bucket += 1
        if last:
            while next_bucket < len(profile.buckets):  # a plan naming layers out of order
                last_ready = state["t"]
                start, end = issue(grad_op, profile.buckets[next_bucket][0], state["t"])
                bucket_times.append((start, end))
                next_bucket += 1
            backward_end = state["t"]
            wait(state["comm_free"])
            gradients_done = state["t"]
    tail_exposed = state["t"] - backward_end
    optimizer = profile.optimizer_s / (group if zero >= 1 else 1) * slow
    other = profile.other_s * slow
    state["t"] += other + optimizer
    if zero in (1, 2) and not chunked:  # the FP16 weights all-gathered after the update, not overlapped
        wait(issue("all-gather", sum(profile.layer_bytes), state["t"])[1])
    compute = grad_accum * (upload + sum(fwd) + sum(bwd)) + other + optimizer
    bucket_exposed = [max(0.0, end - max(start, backward_end)) for start, end in bucket_times]
    return StepResult(step_s=state["t"], compute_s=compute, comm_s=state["comm"],
                      exposed_s=state["exposed"], tail_exposed_s=tail_exposed,
                      hidden_fraction=min(1.0, max(0.0, 1 - state["exposed"] / state["comm"])) if state["comm"] > 0 else 1.0,
                      ops=ops, algorithms=sorted(used), bucket_exposed_s=bucket_exposed,
                      bytes_sent=state["sent"], shard_size=group,
                      ready_to_update_s=gradients_done - last_ready if profile.buckets else 0.0)


def fit_alpha_beta(rows, ranks):
    """Ordinary least squares of t = a + beta x over (bytes, seconds) rows, x = bus bytes
    = B 2(N-1)/N; a >= 0 (refit through 0 where it comes out negative). Unweighted, so the
    large sizes (gradient buckets are MiB) set beta, and a is loose. Returns (a seconds,
    beta s/byte): the per-step latency is a / (2(N-1)), the bus bandwidth 1/beta."""
    if ranks < 2 or len(rows) < 2:
        raise ModelError("a fit needs a table with at least 2 sizes measured at N >= 2")
    pts = [(b * 2 * (ranks - 1) / ranks, t) for b, t in rows if t > 0]
    w = [1.0 for _ in pts]
    sw = sum(w)
    sx = sum(wi * x for wi, (x, _) in zip(w, pts))
    sy = sum(wi * t for wi, (_, t) in zip(w, pts))
    sxx = sum(wi * x * x for wi, (x, _) in zip(w, pts))
    sxy = sum(wi * x * t for wi, (x, t) in zip(w, pts))
    det = sw * sxx - sx * sx
    if det <= 0:
        raise ModelError("a fit needs at least 2 different sizes")
    beta = (sw * sxy - sx * sy) / det
    alpha = (sy - beta * sx) / sw
    if alpha < 0:
        alpha, beta = 0.0, sxy / sxx
    if beta <= 0:
        raise ModelError("the table's times do not grow with size: no bandwidth to fit")
    return alpha, beta


def link_from_fit(alpha, beta, ranks):
    """(per-step latency s, bandwidth B/s) of the ring whose all-reduce the fit describes."""
    return alpha / (2 * (ranks - 1)), 1 / beta
