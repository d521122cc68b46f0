#!/usr/bin/env python3
"""Closed-form checks of launch/ddp_tools/scaling/ (no ddp_train needed).

Every expected value is written out here from the alpha-beta formulas, not taken from
the model's own functions; costs and sizes are fresh random draws (the seed is printed
on failure). fixtures/trace_mlp_1rank.json is a synthetic one-rank trace (format
"ddp_train trace 1"): 4 traced steps of a 3-layer MLP, step 1 slow (warm-up, must be
dropped), steps 2-4 with known medians; its eval event lies outside every step.
Run: PYTHONPATH=launch python3 tests/python/test_scaling_model.py (ctest sets PYTHONPATH).
Exit status: 0 passed, 1 failed, 77 passed but the PNG test skipped (no matplotlib).
"""
import csv
import math
import os
import random
import subprocess
import sys
import tempfile
import unittest

from ddp_tools.scaling import scaling_model_inputs as inputs  # launch/ is on PYTHONPATH (ctest sets it)
from ddp_tools.scaling.checkpoint_cost import STORAGE, Storage, checkpoint_cost, state_bytes
from ddp_tools.scaling.scaling_model_core import Cluster, Link, Profile, collective_s, simulate_step

# What the tools write is recorded (launch/ddp_tools/common/output_registry.py): in a
# registry of this run's own, not the user's ~/.local/state (removed at exit).
_STATE = tempfile.TemporaryDirectory(prefix="test_scaling_model_state_")
os.environ["XDG_STATE_HOME"] = _STATE.name

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.join(HERE, "..", "..", "launch")

FIXTURE = os.path.join(HERE, "fixtures", "trace_mlp_1rank.json")
CLI = os.path.join(LAUNCH, "scaling_model.py")
SEED = int.from_bytes(os.urandom(4), "little")
RNG = random.Random(SEED)


def flat_cluster(bw, lat, per_node=1 << 20):
    return Cluster("test", per_node, Link(bw, lat), Link(bw / 10, lat * 3))


def ring_ar(nbytes, n, bw, lat):
    return 2 * (n - 1) * lat + 2 * (n - 1) / n * nbytes / bw


def profile(fwd, bwd, buckets, layer_bytes, rows=32, opt=0.0, upload=0.0, other=0.0):
    return Profile("test", fwd, bwd, buckets, layer_bytes, rows, 1, 0, 1000,
                   upload_s=upload, optimizer_s=opt, other_s=other)


class ScalingModelTest(unittest.TestCase):
    def setUp(self):
        self.bw = RNG.uniform(1e9, 500e9)
        self.lat = RNG.uniform(1e-6, 20e-6)
        self.msg = f"seed {SEED}"

    def test_one_bucket_no_overlap_adds_the_whole_allreduce(self):
        nbytes, n = RNG.uniform(1e6, 1e9), RNG.randint(2, 64)
        p = profile([1e-3, 2e-3], [3e-3, 4e-3], [(nbytes, 0)], [nbytes / 2] * 2, opt=5e-4, upload=1e-4, other=2e-4)
        r = simulate_step(p, n, flat_cluster(self.bw, self.lat), "ring")
        compute = 1e-4 + 1e-3 + 2e-3 + 3e-3 + 4e-3 + 5e-4 + 2e-4
        self.assertAlmostEqual(r.compute_s, compute, delta=1e-12, msg=self.msg)
        self.assertAlmostEqual(r.step_s, compute + ring_ar(nbytes, n, self.bw, self.lat), delta=1e-12, msg=self.msg)
        self.assertAlmostEqual(r.exposed_s, r.comm_s, delta=1e-12, msg=self.msg)

    def test_a_bucket_ready_mid_layer_hides_behind_the_rest_of_that_layer(self):
        nbytes, n = RNG.uniform(1e6, 1e8), RNG.randint(2, 64)
        cost = ring_ar(nbytes, n, self.bw, self.lat)
        frac = RNG.uniform(0.1, 0.9)
        bwd = RNG.uniform(0.1, 3.0) * cost  # the layer's backward, of which 1 - frac is left at the start
        p = Profile("mid", [1e-3], [bwd], [(nbytes, 0)], [nbytes], 32, ready_fraction=[frac])
        r = simulate_step(p, n, flat_cluster(self.bw, self.lat), "ring")
        # Started frac into the layer: exposed is what outlasts the layer's remaining backward.
        self.assertAlmostEqual(r.exposed_s, max(0.0, cost - (1 - frac) * bwd), delta=1e-12, msg=self.msg)
        self.assertAlmostEqual(r.step_s, 1e-3 + bwd + max(0.0, cost - (1 - frac) * bwd), delta=1e-12, msg=self.msg)

    def test_small_early_buckets_under_long_backward_are_hidden(self):
        n, layers = RNG.randint(2, 16), 6
        small = RNG.uniform(1e3, 1e5)
        cost = ring_ar(small, n, self.bw, self.lat)
        bwd = [0.0] * layers
        bwd[0] = 10 * 4 * cost  # layer 0's backward outlasts all 4 collectives
        buckets = [(small, layers - 1)] * 4
        p = profile([1e-4] * layers, bwd, buckets, [small] * layers)
        r = simulate_step(p, n, flat_cluster(self.bw, self.lat), "ring")
        self.assertEqual(r.exposed_s, 0.0, msg=self.msg)
        self.assertAlmostEqual(r.comm_s, 4 * cost, delta=1e-15, msg=self.msg)
        self.assertAlmostEqual(r.hidden_fraction, 1.0, msg=self.msg)
        # The same plus a last bucket ready only at backward's end: exactly that bucket is exposed.
        last = RNG.uniform(1e6, 1e8)
        p = profile([1e-4] * layers, bwd, buckets + [(last, 0)], [small] * layers)
        r = simulate_step(p, n, flat_cluster(self.bw, self.lat), "ring")
        self.assertAlmostEqual(r.exposed_s, ring_ar(last, n, self.bw, self.lat), delta=1e-12, msg=self.msg)
        self.assertAlmostEqual(r.bucket_exposed_s[-1], r.exposed_s, delta=1e-12)
        self.assertEqual(r.bucket_exposed_s[:4], [0.0] * 4)

    def test_ring_wins_large_messages_at_small_n_and_tree_small_messages_at_large_n(self):
        c = flat_cluster(self.bw, self.lat)

        def tree(nbytes, n):
            return 2 * math.log2(n) * self.lat + 2 * nbytes / self.bw

        for n in (4, 64, 4096):
            # ring == tree where (N-1-log2 N) alpha = B / (N bw)
            crossing = n * self.bw * self.lat * (n - 1 - math.log2(n))
            for nbytes, want in ((0.5 * crossing, "tree"), (2 * crossing, "ring")):
                seconds, used = collective_s("all-reduce", nbytes, n, c, "auto")
                self.assertEqual(used, want, msg=f"{self.msg} N={n} B={nbytes:g}")
                self.assertAlmostEqual(seconds, min(ring_ar(nbytes, n, self.bw, self.lat), tree(nbytes, n)),
                                       delta=1e-12 + 1e-9 * seconds, msg=self.msg)
            self.assertAlmostEqual(collective_s("all-reduce", 1e3, n, c, "tree")[0], tree(1e3, n), delta=1e-12)
        self.assertEqual(collective_s("all-reduce", 256e6, 4, c, "auto")[1], "ring")
        self.assertEqual(collective_s("all-reduce", 1e3, 4096, c, "auto")[1], "tree")

    def test_zero3_sends_one_and_a_half_times_zero0_and_zero1_the_same(self):
        n, layers = RNG.randint(2, 512), RNG.randint(2, 8)
        layer_bytes = [RNG.uniform(1e4, 1e7) for _ in range(layers)]
        buckets = [(layer_bytes[i], i) for i in reversed(range(layers))]
        p = profile([1e-4] * layers, [2e-4] * layers, buckets, layer_bytes)
        c = flat_cluster(self.bw, self.lat, per_node=8)
        sent = {z: simulate_step(p, n, c, "auto", zero=z).bytes_sent for z in (0, 1, 2, 3)}
        self.assertAlmostEqual(sent[0], 2 * (n - 1) / n * sum(layer_bytes), delta=1e-6 * sent[0])
        self.assertAlmostEqual(sent[1] / sent[0], 1.0, delta=1e-12, msg=self.msg)
        self.assertAlmostEqual(sent[2] / sent[0], 1.0, delta=1e-12, msg=self.msg)
        self.assertAlmostEqual(sent[3] / sent[0], 1.5, delta=1e-12, msg=self.msg)
        # The synthetic wide MLP (buckets planned like the trainer, padding and all): within 0.01%.
        mlp = inputs.synthetic_profile("mlp-wide")
        ratio = simulate_step(mlp, 64, c, zero=3).bytes_sent / simulate_step(mlp, 64, c, zero=0).bytes_sent
        self.assertAlmostEqual(ratio, 1.5, delta=1.5e-4)

    def test_hierarchy_uses_intra_figures_up_to_one_node(self):
        g = 8
        c = Cluster("h", g, Link(self.bw, self.lat), Link(1.0, 1.0))  # an inter link that would dominate
        nbytes = RNG.uniform(1e5, 1e8)
        for n in range(2, g + 1):
            self.assertAlmostEqual(collective_s("all-reduce", nbytes, n, c, "ring")[0],
                                   ring_ar(nbytes, n, self.bw, self.lat), delta=1e-12, msg=self.msg)
            self.assertAlmostEqual(collective_s("all-gather", nbytes, n, c)[0],
                                   (n - 1) * self.lat + (n - 1) / n * nbytes / self.bw, delta=1e-12)
        inter = Link(self.bw / 9, self.lat * 2)
        c = Cluster("h", g, Link(self.bw, self.lat), inter)
        n = 4 * g
        intra_half = (g - 1) * self.lat + (g - 1) / g * nbytes / self.bw
        want = 2 * intra_half + ring_ar(nbytes / g, 4, inter.bandwidth_Bps, inter.latency_s)
        self.assertAlmostEqual(collective_s("all-reduce", nbytes, n, c, "ring")[0], want, delta=1e-12,
                               msg=self.msg)

    def test_hybrid_sharding_reduces_in_the_group_then_across_the_groups(self):
        g, nodes = 8, RNG.randint(2, 16)
        n = g * nodes
        inter = Link(self.bw / RNG.uniform(2, 20), self.lat * RNG.uniform(1, 5))
        c = Cluster("h", g, Link(self.bw, self.lat), inter)
        nbytes = RNG.uniform(1e6, 1e9)
        p = profile([1e-3], [2e-3], [(nbytes, 0)], [nbytes], opt=8e-3)
        # A group of the whole world (or more) is plain sharding.
        flat = simulate_step(p, n, c, "ring", zero=1)
        for size in (None, n, 2 * n):
            same = simulate_step(p, n, c, "ring", zero=1, shard_size=size)
            self.assertAlmostEqual(same.step_s, flat.step_s, delta=1e-15, msg=self.msg)
        # Groups of a node: the bucket's reduce-scatter over 8 on NVLink, its 1/8 all-reduced over
        # the nodes' ring on the inter link, the optimizer / 8, the weights all-gathered over 8.
        r = simulate_step(p, n, c, "ring", zero=1, shard_size=g)
        half = (g - 1) * self.lat + (g - 1) / g * nbytes / self.bw
        across = ring_ar(nbytes / g, nodes, inter.bandwidth_Bps, inter.latency_s)
        want = 1e-3 + 2e-3 + 8e-3 / g + (half + across) + half
        self.assertAlmostEqual(r.step_s, want, delta=1e-12 + 1e-9 * want, msg=self.msg)
        self.assertAlmostEqual(r.bytes_sent, 2 * (g - 1) / g * nbytes + 2 * (nodes - 1) / nodes * nbytes / g,
                               delta=1e-6 * nbytes, msg=self.msg)
        # Stage 3's gathers run in the group too: at many nodes, far cheaper than over the world.
        layers = [RNG.uniform(1e6, 1e8) for _ in range(4)]
        p3 = profile([1e-4] * 4, [2e-4] * 4, [(b, i) for i, b in reversed(list(enumerate(layers)))], layers)
        self.assertLess(simulate_step(p3, n, c, zero=3, shard_size=g).exposed_s,
                        simulate_step(p3, n, c, zero=3).exposed_s, msg=self.msg)
        self.assertEqual(simulate_step(p3, n, c, zero=0, shard_size=g).step_s, simulate_step(p3, n, c).step_s)

    def test_prefetch_depth_starts_gathers_that_many_layers_ahead(self):
        """2L gathers of g seconds each (forward then backward order) around layers of f seconds
        and no gradient buckets: depth 0 waits for every gather; any depth >= 1 waits for the
        first only while g <= f, and once gathering is slower than computing (g > f) a deeper
        prefetch gains nothing: the gathers run back to back, step = 2L g + f."""
        n, layers = RNG.randint(2, 64), RNG.randint(2, 6)
        nbytes = RNG.uniform(1e5, 1e8)
        c = flat_cluster(self.bw, self.lat)
        g = (n - 1) * self.lat + (n - 1) / n * nbytes / self.bw
        for f, depths in ((RNG.uniform(1.01, 5) * g, (1, 2, 3, True)), (g / RNG.uniform(1.1, 5), (1, 3))):
            p = profile([f] * layers, [f] * layers, [], [nbytes] * layers)
            none = simulate_step(p, n, c, zero=3, zero3_prefetch=0)
            self.assertAlmostEqual(none.exposed_s, 2 * layers * g, delta=1e-12 + 1e-9 * g, msg=self.msg)
            self.assertEqual(simulate_step(p, n, c, zero=3, zero3_prefetch=False).step_s, none.step_s)
            for depth in depths:
                r = simulate_step(p, n, c, zero=3, zero3_prefetch=depth)
                want = g if g <= f else 2 * layers * (g - f) + f
                self.assertAlmostEqual(r.exposed_s, want, delta=1e-12 + 1e-9 * want, msg=f"{self.msg} depth {depth}")
                self.assertAlmostEqual(r.comm_s, 2 * layers * g, delta=1e-12 + 1e-9 * g, msg=self.msg)
                self.assertEqual(len(r.ops), 2 * layers)
        # Where the communication idles between gathers a deeper prefetch does help: layers of
        # no bytes, then one of G with f < G < 1.5 f (no latency). Depth 1 starts its forward
        # gather one layer ahead (G - f exposed), and so its backward gather behind it
        # (G - f again); depth 2 starts it two layers ahead: nothing exposed.
        c = Cluster("l0", 1 << 20, Link(self.bw, 0.0), Link(self.bw, 0.0))
        big = (n - 1) / n * nbytes / self.bw
        f = big / RNG.uniform(1.05, 1.45)
        p = profile([f] * 3, [RNG.uniform(0.1, 2) * f] * 3, [], [0.0, 0.0, nbytes])
        for depth, want in ((0, 2 * big), (1, 2 * (big - f)), (2, 0.0), (5, 0.0)):
            r = simulate_step(p, n, c, zero=3, zero3_prefetch=depth)
            self.assertAlmostEqual(r.exposed_s, want, delta=1e-12 + 1e-9 * big, msg=f"{self.msg} depth {depth}")

    def test_zero1_updated_weights_gathered_per_bucket_under_the_next_forward(self):
        """Two layers, bucket 0 ready after layer 1, bucket 1 after layer 0 (layer 0's chunk is
        gathered first): layer 0 waits for its chunk, layer 1 for the rest of the other beyond
        layer 0's forward; the buckets' reduce-scatters as before. Not overlapped: one
        all-gather of everything after the update, exposed whole."""
        n = RNG.randint(2, 64)
        b0, b1 = RNG.uniform(1e5, 1e8), RNG.uniform(1e5, 1e8)
        c = flat_cluster(self.bw, self.lat)

        def half(nbytes):
            return (n - 1) * self.lat + (n - 1) / n * nbytes / self.bw

        f0, f1 = RNG.uniform(0.1, 2) * half(b0), RNG.uniform(0.1, 2) * half(b0)
        bwd0 = 2 * half(b0)  # layer 0's backward hides bucket 0's reduce-scatter
        opt = RNG.uniform(1e-4, 1e-2)
        p = profile([f0, f1], [bwd0, RNG.uniform(1e-4, 1e-3)], [(b0, 1), (b1, 0)], [b1, b0], opt=opt)
        r = simulate_step(p, n, c, zero=1)
        want = half(b1) + max(0.0, half(b0) - f0) + half(b1)
        self.assertAlmostEqual(r.exposed_s, want, delta=1e-12 + 1e-9 * want, msg=self.msg)
        self.assertAlmostEqual(r.step_s, r.compute_s + want, delta=1e-12 + 1e-9 * want, msg=self.msg)
        self.assertAlmostEqual(r.compute_s, f0 + f1 + bwd0 + p.backward_s[1] + opt / n, delta=1e-12)
        self.assertEqual([op for op, _ in r.ops], ["all-gather", "all-gather", "reduce-scatter", "reduce-scatter"])
        old = simulate_step(p, n, c, zero=1, overlap_update_gathers=False)
        self.assertAlmostEqual(old.exposed_s, half(b1) + half(b0 + b1), delta=1e-12 + 1e-9 * want, msg=self.msg)

    def test_hybrid_on_one_host_costs_both_phases_with_the_tables_at_the_worlds_n(self):
        """On one node, hybrid groups of 2 at N = 4 all run their collectives at once over the
        same links: the reduce-scatter in the group and the replicas' all-reduce are read
        from the table measured at N = 4 (slow), not the one at N = 2 (fast) nor the
        cluster's nominal link; across nodes the replica all-reduce stays on the inter link."""
        fast, slow = Link(self.bw, self.lat), Link(self.bw / RNG.uniform(2, 10), self.lat * RNG.uniform(1, 5))
        c = Cluster("host", 1 << 20, Link(1.0, 1.0), Link(1.0, 1.0),  # nominal links that would dominate
                    fitted={2: (fast.bandwidth_Bps, fast.latency_s), 4: (slow.bandwidth_Bps, slow.latency_s)})
        nbytes = RNG.uniform(1e6, 1e8)
        p = profile([1e-4], [1e-4], [(nbytes, 0)], [nbytes])
        r = simulate_step(p, 4, c, zero=1, shard_size=2, overlap_update_gathers=False)
        rs = slow.latency_s + nbytes / 2 / slow.bandwidth_Bps
        across = ring_ar(nbytes / 2, 2, slow.bandwidth_Bps, slow.latency_s)
        gather = slow.latency_s + nbytes / 2 / slow.bandwidth_Bps
        self.assertAlmostEqual(r.comm_s, rs + across + gather, delta=1e-12 + 1e-9 * r.comm_s, msg=self.msg)
        # Two nodes of 2 with nominal links: the group on the intra link, the replicas on the inter.
        intra, inter = Link(self.bw, self.lat), Link(self.bw / 7, self.lat * 2)
        r = simulate_step(p, 4, Cluster("2x2", 2, intra, inter), zero=1, shard_size=2, overlap_update_gathers=False)
        want = 2 * (self.lat + nbytes / 2 / self.bw) + ring_ar(nbytes / 2, 2, inter.bandwidth_Bps, inter.latency_s)
        self.assertAlmostEqual(r.comm_s, want, delta=1e-12 + 1e-9 * want, msg=self.msg)

    def test_op_factors_scale_reduce_scatter_and_all_gather_only(self):
        n, nbytes = RNG.randint(2, 64), RNG.uniform(1e5, 1e9)
        rs, ag = RNG.uniform(0.5, 4), RNG.uniform(0.5, 4)
        c = Cluster("f", 1 << 20, Link(self.bw, self.lat), Link(self.bw, self.lat),
                    op_factors={"reduce-scatter": rs, "all-gather": ag})
        half = (n - 1) * self.lat + (n - 1) / n * nbytes / self.bw
        self.assertAlmostEqual(collective_s("reduce-scatter", nbytes, n, c)[0], rs * half, delta=1e-12 + 1e-9 * half)
        self.assertAlmostEqual(collective_s("all-gather", nbytes, n, c)[0], ag * half, delta=1e-12 + 1e-9 * half)
        self.assertAlmostEqual(collective_s("all-reduce", nbytes, n, c, "ring")[0], ring_ar(nbytes, n, self.bw, self.lat),
                               delta=1e-12)
        d = {"name": "x", "gpus_per_node": 8, "intra": {"bandwidth_GBps": 1, "latency_us": 1},
             "inter": {"bandwidth_GBps": 1, "latency_us": 1}, "op_factors": {"reduce-scatter": rs}, "cores_per_node": 4}
        c = inputs.cluster_from_dict(d, "x.json")
        self.assertEqual((c.op_factors, c.cores_per_node), ({"reduce-scatter": rs}, 4.0))
        for bad in ({"all-reduce": 2.0}, {"reduce-scatter": 0.0}, {"all-gather": "fast"}):
            with self.assertRaises(inputs.ModelError):
                inputs.cluster_from_dict(dict(d, op_factors=bad), "x.json")

    def test_more_ranks_than_cores_slow_the_compute_by_ranks_over_cores(self):
        cores = RNG.randint(1, 8)
        c = Cluster("cpu", 1 << 20, Link(self.bw, self.lat), Link(self.bw, self.lat), cores_per_node=cores)
        p = profile([1e-3, 2e-3], [3e-3, 4e-3], [], [1e3, 1e3], opt=5e-4, upload=1e-4, other=2e-4)
        alone = 1e-4 + 1e-2 + 5e-4 + 2e-4
        for n in (1, cores, cores + 1, 4 * cores):
            r = simulate_step(p, n, c)
            self.assertAlmostEqual(r.compute_s, alone * max(1.0, n / cores), delta=1e-12, msg=f"N {n} cores {cores}")
            self.assertAlmostEqual(r.step_s, r.compute_s, delta=1e-12)
        self.assertEqual(simulate_step(p, 64, flat_cluster(self.bw, self.lat)).compute_s, simulate_step(p, 1, c).compute_s)

    def test_ready_to_update_is_the_last_buckets_collective_after_its_ready_point(self):
        n, nbytes = RNG.randint(2, 64), RNG.uniform(1e5, 1e8)
        frac, bwd = RNG.uniform(0.1, 0.9), RNG.uniform(1e-4, 1e-2)
        p = Profile("t", [1e-3], [bwd], [(nbytes, 0)], [nbytes], 32, ready_fraction=[frac])
        r = simulate_step(p, n, flat_cluster(self.bw, self.lat), "ring")
        want = max((1 - frac) * bwd, ring_ar(nbytes, n, self.bw, self.lat))
        self.assertAlmostEqual(r.ready_to_update_s, want, delta=1e-12, msg=self.msg)

    def test_gradient_accumulation_repeats_compute_not_communication(self):
        k, n = RNG.randint(2, 8), RNG.randint(2, 32)
        p = profile([1e-3, 2e-3], [3e-3, 4e-3], [(1e6, 1), (5e6, 0)], [1e6, 5e6], opt=1e-3, upload=5e-4, other=1e-4)
        c = flat_cluster(self.bw, self.lat)
        one, many = simulate_step(p, n, c), simulate_step(p, n, c, grad_accum=k)
        self.assertAlmostEqual(many.compute_s, k * (5e-4 + 1e-2) + 1e-3 + 1e-4, delta=1e-12, msg=self.msg)
        self.assertAlmostEqual(many.comm_s, one.comm_s, delta=1e-15, msg=self.msg)
        self.assertEqual(len(many.ops), len(one.ops))

    def test_trace_fixture_gives_the_medians_and_the_bucket_plan(self):
        p = inputs.profile_from_trace(inputs.load_trace(FIXTURE), FIXTURE)
        for got, want in ((p.forward_s, [110, 21, 6]), (p.backward_s, [160, 42, 12])):
            self.assertEqual(len(got), 3)
            for g, w in zip(got, want):
                self.assertAlmostEqual(g, w * 1e-6, delta=1e-12)
        self.assertAlmostEqual(p.upload_s, 32e-6, delta=1e-12)
        self.assertAlmostEqual(p.optimizer_s, 52e-6, delta=1e-12)
        self.assertAlmostEqual(p.other_s, 10e-6, delta=1e-12)
        self.assertAlmostEqual(p.measured_step_s, 445e-6, delta=1e-12)
        self.assertEqual(p.buckets, [(4832.0, 1), (100480.0, 0)])
        self.assertEqual((p.rows, p.micro_batches, p.zero_stage, p.parameters), (64, 1, 0, 52650))
        self.assertAlmostEqual(sum(p.layer_bytes), 4832 + 100480)
        r = simulate_step(p, 1, flat_cluster(self.bw, self.lat))
        self.assertAlmostEqual(r.step_s, 445e-6, delta=1e-12)  # N = 1 reproduces the measured step

    def test_bad_trace_is_one_line_and_status_2(self):
        with tempfile.TemporaryDirectory() as d:
            garbled = os.path.join(d, "garbled.json")
            with open(garbled, "w") as f:
                f.write('{"traceEvents": [ {"ph": "X", ')
            foreign = os.path.join(d, "foreign.json")
            with open(foreign, "w") as f:
                f.write('{"traceEvents": [], "otherData": {"format": "something else"}}')
            with open(FIXTURE) as f:
                good = f.read()
            no_dur = os.path.join(d, "no_dur.json")  # an event without its duration
            with open(no_dur, "w") as f:
                f.write(good.replace('"dur": 100.0,', '', 1))
            no_buckets = os.path.join(d, "no_buckets.json")
            with open(no_buckets, "w") as f:
                f.write(good.replace('"buckets"', '"buckets_renamed"'))
            self.assertNotEqual(good.replace('"dur": 100.0,', '', 1), good)
            for path in (os.path.join(d, "missing.json"), garbled, foreign, no_dur, no_buckets):
                run = subprocess.run([sys.executable, CLI, "--trace", path], capture_output=True, text=True)
                self.assertEqual(run.returncode, 2, msg=run.stderr)
                lines = run.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, msg=run.stderr)
                self.assertIn(os.path.basename(path), lines[0])
                self.assertNotIn("Traceback", run.stderr)
            run = subprocess.run([sys.executable, CLI, "--trace", FIXTURE, "--ranks", "two"], capture_output=True,
                                 text=True)
            self.assertEqual((run.returncode, len(run.stderr.strip().splitlines())), (2, 1), msg=run.stderr)
            self.assertIn("--ranks", run.stderr)

    def test_a_checkpoint_blocks_sync_for_all_of_it_and_async_for_the_gather_and_copy(self):
        nbytes, gather = RNG.uniform(1e6, 1e10), RNG.uniform(0.0, 0.1)
        copy_bw, write_bw = RNG.uniform(1e8, 5e10), RNG.uniform(1e7, 5e9)
        storage = Storage("test", copy_bw, write_bw)
        sync = checkpoint_cost(nbytes, storage, False, gather)
        self.assertAlmostEqual(sync["blocked_s"], gather + nbytes / copy_bw + nbytes / write_bw, delta=1e-12,
                               msg=self.msg)
        # Async: the write beside the steps; the next checkpoint waits for what is left of it.
        for interval in (math.inf, RNG.uniform(0.0, 0.5) * nbytes / write_bw):
            asyn = checkpoint_cost(nbytes, storage, True, gather, interval)
            left = max(0.0, nbytes / write_bw - interval)
            self.assertAlmostEqual(asyn["blocked_s"], gather + nbytes / copy_bw + left, delta=1e-12, msg=self.msg)
        params = RNG.randint(1, 10 ** 9)
        self.assertEqual(state_bytes(params), 12 * params)
        self.assertEqual(state_bytes(params, adamw=False), 8 * params)

    def test_the_cpu_host_storage_reproduces_its_calibration(self):
        # launch/results/2026-12-05-cpu-async-checkpoint.md, the 107.6 MB MLP: async 0.124 s, sync 0.555 s.
        cpu = STORAGE["cpu-host"]
        self.assertAlmostEqual(checkpoint_cost(107_602_720, cpu, True)["blocked_s"], 0.124, delta=1e-9)
        self.assertAlmostEqual(checkpoint_cost(107_602_720, cpu, False)["blocked_s"], 0.555, delta=1e-9)

    def test_the_projection_prices_checkpoints_async_below_sync(self):
        with tempfile.TemporaryDirectory() as tmp:
            md = os.path.join(tmp, "p.md")
            run = subprocess.run([sys.executable, CLI, "--projection", md], capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            with open(md) as f:
                rows = [line.split("|") for line in f
                        if line.startswith("| gpt2-124m | 3 + prefetch + hybrid G 8 |") and line.count("|") == 11]
            self.assertEqual(len(rows), 1, "one checkpoint row for GPT-2 at ZeRO 3 + prefetch + hybrid")
            sync_ms, async_ms = float(rows[0][7]), float(rows[0][8])
            self.assertLess(async_ms * 5, sync_ms)

    def test_cli_writes_the_csv_and_states_its_assumptions(self):
        with tempfile.TemporaryDirectory() as d:
            out_csv, out_md = os.path.join(d, "m.csv"), os.path.join(d, "m.md")
            run = subprocess.run([sys.executable, CLI, "--trace", FIXTURE, "--cluster", "cpu-host", "--ranks",
                                  "1,2,4,128", "--csv", out_csv, "--md", out_md], capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, msg=run.stderr)
            with open(out_csv) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual(list(rows[0].keys())[:4], ["ranks", "mode", "algorithm", "zero_stage"])
            self.assertEqual([(r["mode"], r["ranks"]) for r in rows],
                             [("weak", "1"), ("weak", "2"), ("weak", "4"), ("weak", "128"),
                              ("strong", "1"), ("strong", "2"), ("strong", "4")])  # 64 rows: 128 would get half a row
            self.assertEqual(float(rows[0]["efficiency"]), 1.0)
            for r in rows:
                self.assertAlmostEqual(float(r["efficiency"]), float(r["speedup"]) / int(r["ranks"]), delta=1e-4)
            with open(out_md) as f:
                md = f.read()
            for said in ("linear in rows", "FIFO", "no stragglers", "cpu-host", "Strong scaling stops"):
                self.assertIn(said, md)

    def test_rows_the_trainer_would_refuse_are_left_out_and_said(self):
        # ddp_train --check-worlds decides (launch/ddp_tools/scaling/trainer_rules.py): a ZeRO group of 3
        # does not divide 4 ranks; a global batch of 8 rows does not divide by 3 or 6 ranks.
        binary = os.path.join(os.path.dirname(LAUNCH), "build", "ddp_train")
        if not os.path.isfile(os.environ.get("DDP_TRAIN", binary)):
            self.skipTest("no build/ddp_train to ask")
        with tempfile.TemporaryDirectory() as d:
            out_csv = os.path.join(d, "m.csv")
            run = subprocess.run([sys.executable, CLI, "--synthetic", "gpt2-124m", "--zero", "1", "--zero-shard-size",
                                  "3", "--ranks", "3,4,6", "--csv", out_csv], capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, msg=run.stderr)
            with open(out_csv) as f:
                rows = [(r["mode"], r["ranks"]) for r in csv.DictReader(f)]
            self.assertEqual(rows, [("weak", "3"), ("weak", "6")])
            for said in ("N = 4 (weak) left out: ddp_train refuses it: --zero-shard-size 3 does not divide",
                         "N = 3 (strong) left out: ddp_train refuses it: --global-batch 8 does not divide by 3"):
                self.assertIn(said, run.stderr)
            # Without a trainer to ask, every row is projected and that is said.
            env = dict(os.environ, DDP_TRAIN=os.path.join(d, "no-such-ddp_train"))
            run = subprocess.run([sys.executable, CLI, "--synthetic", "gpt2-124m", "--zero", "1", "--zero-shard-size",
                                  "3", "--ranks", "3,4,6", "--mode", "weak", "--csv", out_csv], capture_output=True,
                                 text=True, env=env)
            self.assertEqual(run.returncode, 0, msg=run.stderr)
            self.assertIn("Not checked against ddp_train's rules", run.stdout)
            with open(out_csv) as f:
                self.assertEqual(len(list(csv.DictReader(f))), 3)

    def test_validation_measures_an_n2_merged_trace(self):
        """The fixture made a merged 2-rank trace: per step bucket 0 (30 us) runs under
        layer 0's backward, bucket 1 (50 us) starts at backward's end and is waited for."""
        import copy
        import json
        from ddp_tools.scaling import validate_scaling_model as validate
        with open(FIXTURE) as f:
            trace = json.load(f)
        events = []
        for e in trace["traceEvents"]:
            if e.get("cat") == "step":
                e["dur"] += 50.0
            events.append(e)
        for e in list(events):
            a = e.get("args", {})
            if e.get("cat") == "optimizer":
                e["ts"] += 50.0
            if e.get("cat") == "backward" and a.get("layer") == 1:
                events.append({"name": "all-reduce bucket 0", "cat": "comm", "ph": "X", "ts": e["ts"] + e["dur"],
                               "dur": 30.0, "pid": 0, "tid": 1, "args": {"step": a["step"], "bucket": 0}})
            if e.get("cat") == "backward" and a.get("layer") == 0:
                end = e["ts"] + e["dur"]
                events.append({"name": "all-reduce bucket 1", "cat": "comm", "ph": "X", "ts": end, "dur": 50.0,
                               "pid": 0, "tid": 1, "args": {"step": a["step"], "bucket": 1}})
                events.append({"name": "wait for communication", "cat": "comm_wait", "ph": "X", "ts": end,
                               "dur": 50.0, "pid": 0, "tid": 0, "args": {"step": a["step"]}})
        other_rank = [dict(copy.deepcopy(e), pid=1) for e in events]
        for e in other_rank:
            e["dur"] = e.get("dur", 0) * 3  # rank 1 differs: the merged file must be read as rank 0
        trace["traceEvents"] = events + other_rank
        got = validate.measured(trace, "merged.json")
        self.assertAlmostEqual(got["step"], 495e-6, delta=1e-12)
        self.assertAlmostEqual(got["exposed"], 50e-6, delta=1e-12)
        self.assertAlmostEqual(got["comm"], 80e-6, delta=1e-12)
        self.assertAlmostEqual(got["hidden"], 1 - 50 / 80, delta=1e-9)
        self.assertEqual(len(got["buckets"]), 2)
        self.assertAlmostEqual(got["buckets"][0], 0.0, delta=1e-12)
        self.assertAlmostEqual(got["buckets"][1], 50e-6, delta=1e-12)
        # Its profile keeps the compute apart from the wait: other is still 10 us.
        p = inputs.profile_from_trace(trace, "merged.json")
        self.assertAlmostEqual(p.other_s, 10e-6, delta=1e-12)

    def test_png_is_written(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("no matplotlib")
        with tempfile.TemporaryDirectory() as d:
            png = os.path.join(d, "m.png")
            run = subprocess.run([sys.executable, CLI, "--synthetic", "mlp-wide", "--png", png],
                                 capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, msg=run.stderr)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    if result.failures or result.errors:
        print(f"(seed {SEED})")
        sys.exit(1)
    sys.exit(77 if result.skipped else 0)
