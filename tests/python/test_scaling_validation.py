#!/usr/bin/env python3
"""The scaling model's validation against traces (launch/ddp_tools/scaling/trace_exposure.py,
validation_runs.py, validate_scaling_model.py) on small synthetic traces: no ddp_train, no MPI.

Each trace is written out here with its waits placed by hand, so the expected exposure is
arithmetic on the numbers below, not the code's own:
  - ZeRO 3, 2 layers, layer 1 gathered as two all-gathers (as the GPT's tied head is):
    per step the compute thread waits 15 + 12 + 15 + 30 = 72 us before its layers and 30 us
    in comm_wait; its collectives take 130 us; 30 us pass from the last bucket's ready
    instant to the optimizer.
  - ZeRO 1, the previous step's chunks of updated weights (bucket 1's, a padding chunk,
    bucket 0's): layer 0 waits for bucket 1's chunk only (10 us), layer 1 for bucket 0's
    (20 us); waiting for the last chunk everywhere would make it 40.
Step 1 of each trace is slow (warm-up): it must be dropped.
Run: PYTHONPATH=launch python3 tests/python/test_scaling_validation.py (ctest sets PYTHONPATH).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from ddp_tools.scaling import scaling_model_inputs as inputs  # launch/ is on PYTHONPATH (ctest sets it)
from ddp_tools.scaling import trace_exposure
from ddp_tools.scaling import validation_runs as runs
from ddp_tools.scaling.scaling_model_core import ModelError

# What the tools write is recorded (launch/ddp_tools/common/output_registry.py): in a
# registry of this run's own, not the user's ~/.local/state (removed at exit).
_STATE = tempfile.TemporaryDirectory(prefix="test_scaling_validation_state_")
os.environ["XDG_STATE_HOME"] = _STATE.name

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(HERE, "..", "..", "launch", "validate_scaling_model.py")
STEPS = (1, 2, 3, 4)
PERIOD = 1000.0  # us between steps


def x(cat, ts, dur, step, tid=0, **args):
    return {"name": cat, "cat": cat, "ph": "X", "ts": float(ts), "dur": float(dur), "pid": 0, "tid": tid,
            "args": dict(args, step=step)}


def instant(cat, ts, step, **args):
    return {"name": cat, "cat": cat, "ph": "i", "ts": float(ts), "pid": 0, "tid": 0, "args": dict(args, step=step)}


def trace(events, zero, world, buckets):
    return {"traceEvents": events, "otherData": {
        "format": "ddp_train trace 1", "rank": 0, "world_size": world, "zero_stage": zero, "micro_batches": 1,
        "batch_per_rank": 8, "global_batch": 8 * world, "parameters": 1000,
        "layers": [{"layer": 0, "tensors": [2, 3]}, {"layer": 1, "tensors": [0, 1]}],
        "buckets": [{"bucket": i, "bytes": b, "ready_after_layer": r} for i, (b, r) in enumerate(buckets)]}}


def zero3_trace():
    """Two layers, ZeRO 3, --zero-prefetch 0 style waits (the numbers in the docstring)."""
    events = []
    for s in STEPS:
        t = s * PERIOD
        slow = 400.0 if s == 1 else 0.0  # step 1: a long wait before layer 0, dropped
        events += [x("step", t, 250 + slow, s), x("upload", t, 10, s),
                   x("comm", t + 10, 15 + slow, s, tid=1, op="all-gather", layer=0, bytes=100),
                   x("forward", t + 28 + slow, 20, s, layer=0)]
        t += slow
        events += [x("comm", t + 30, 10, s, tid=1, op="all-gather", layer=1, bytes=50),
                   x("comm", t + 40, 20, s, tid=1, op="all-gather", layer=1, bytes=150),
                   x("forward", t + 60, 20, s, layer=1), x("loss", t + 80, 5, s),
                   x("comm", t + 85, 5, s, tid=1, op="all-gather", layer=1, bytes=50),
                   x("comm", t + 90, 10, s, tid=1, op="all-gather", layer=1, bytes=150),
                   x("backward", t + 100, 50, s, layer=1), instant("bucket_ready", t + 140, s, bucket=0),
                   x("comm", t + 140, 30, s, tid=1, op="reduce-scatter", bucket=0, bytes=200),
                   x("comm", t + 170, 10, s, tid=1, op="all-gather", layer=0, bytes=100),
                   x("backward", t + 180, 20, s, layer=0), instant("bucket_ready", t + 200, s, bucket=1),
                   x("comm", t + 200, 30, s, tid=1, op="reduce-scatter", bucket=1, bytes=100),
                   x("comm_wait", t + 200, 30, s), x("optimizer", t + 230, 20, s)]
    return trace(events, 3, 2, [(200, 1), (100, 0)])


def zero1_trace():
    """Two layers, ZeRO 1: each step's optimizer starts the chunks its next forward waits for."""
    events = []
    for s in STEPS:
        t = s * PERIOD
        slow = 300.0 if s == 1 else 0.0
        events += [x("step", t, 200 + slow, s), x("upload", t, 10, s),
                   x("forward", t + 30, 20, s, layer=0), x("forward", t + 75 + slow, 20, s, layer=1)]
        t += slow
        events += [x("backward", t + 95, 30, s, layer=1), instant("bucket_ready", t + 120, s, bucket=0),
                   x("comm", t + 120, 10, s, tid=1, op="reduce-scatter", bucket=0, bytes=4000),
                   x("backward", t + 125, 40, s, layer=0), instant("bucket_ready", t + 165, s, bucket=1),
                   x("comm", t + 165, 15, s, tid=1, op="reduce-scatter", bucket=1, bytes=2000),
                   x("comm_wait", t + 165, 15, s), x("optimizer", t + 180, 20, s)]
        # The chunks for step s + 1 (whose step span starts at (s + 1) PERIOD): bucket 1's
        # (layer 0's) until +20, a padding chunk, bucket 0's until +70.
        n = (s + 1) * PERIOD
        events += [x("comm", n - 5, 25, s, tid=1, op="all-gather", bytes=2000),
                   x("comm", n + 20, 2, s, tid=1, op="all-gather", bytes=16),
                   x("comm", n + 22, 48, s, tid=1, op="all-gather", bytes=4000)]
    return trace(events, 1, 2, [(4000, 1), (2000, 0)])


def one_rank_trace():
    events = []
    for s in STEPS:
        t = s * PERIOD
        events += [x("step", t, 170, s), x("upload", t, 10, s), x("forward", t + 10, 20, s, layer=0),
                   x("forward", t + 30, 20, s, layer=1), x("loss", t + 50, 5, s), x("backward", t + 55, 50, s, layer=1),
                   instant("bucket_ready", t + 95, s, bucket=0), x("backward", t + 105, 20, s, layer=0),
                   instant("bucket_ready", t + 125, s, bucket=1), x("optimizer", t + 125, 45, s)]
    return trace(events, 0, 1, [(200, 1), (100, 0)])


def measure(tr):
    events = inputs.rank_events(tr)
    other = tr["otherData"]
    buckets = [(b["bytes"], b["ready_after_layer"]) for b in other["buckets"]]
    return trace_exposure.measure(events, inputs.steps_of(events, "t.json"), other["zero_stage"], buckets, 1, "t.json")


class TraceExposureTest(unittest.TestCase):
    def test_zero3_waits_before_layers_count_as_exposed(self):
        got = measure(zero3_trace())
        self.assertAlmostEqual(got["layer_waits"], 72e-6, delta=1e-12)
        self.assertAlmostEqual(got["exposed"], 102e-6, delta=1e-12)
        self.assertAlmostEqual(got["comm"], 130e-6, delta=1e-12)
        self.assertAlmostEqual(got["step"], 250e-6, delta=1e-12)
        self.assertAlmostEqual(got["hidden"], 1 - 102 / 130, delta=1e-9)
        self.assertAlmostEqual(got["ready_to_update"], 30e-6, delta=1e-12)

    def test_a_layers_several_gathers_are_one_gather_in_the_costs(self):
        got = measure(zero3_trace())["costs"]
        self.assertEqual(sorted(got), ["all-gather", "reduce-scatter"])
        for have, want in ((got["all-gather"], [15, 30, 15, 10]), (got["reduce-scatter"], [30, 30])):
            self.assertEqual(len(have), len(want))
            for h, w in zip(have, want):
                self.assertAlmostEqual(h, w * 1e-6, delta=1e-12)

    def test_zero1_forward_waits_for_its_own_chunk_of_the_previous_steps_gathers(self):
        got = measure(zero1_trace())
        self.assertAlmostEqual(got["layer_waits"], 30e-6, delta=1e-12)
        self.assertAlmostEqual(got["exposed"], 45e-6, delta=1e-12)
        self.assertEqual(len(got["costs"]["all-gather"]), 3)

    def test_a_zero3_profile_keeps_the_waits_out_of_compute_and_unshards_the_optimizer(self):
        tr = zero3_trace()
        p = inputs.profile_from_trace(tr, "t.json")
        # 250 us step - (upload, forwards, backwards, comm_wait, optimizer: 170) - 72 us of waits
        # = the loss (5) and the 3 us of the first gap that no gather explains.
        self.assertAlmostEqual(p.other_s, 8e-6, delta=1e-12)
        self.assertAlmostEqual(p.optimizer_s, 2 * 20e-6, delta=1e-12)  # the world's 2 shards
        self.assertAlmostEqual(inputs.profile_from_trace(tr, "t.json", shard_size=4).optimizer_s, 80e-6, delta=1e-12)
        self.assertEqual(p.layer_bytes, [100.0, 200.0])  # from the gathers: layer 1's two tensors summed

    def test_an_n1_trace_has_nothing_to_measure(self):
        with self.assertRaises(ValueError):
            measure(one_rank_trace())


class SettingsTest(unittest.TestCase):
    def test_names_parse_into_the_trainers_flags(self):
        s = runs.Setting("z3-g2-p1", 4)
        self.assertEqual((s.zero, s.prefetch, s.shard_size), (3, 1, 2))
        self.assertEqual(s.flags(), ["--zero", "3", "--zero-prefetch", "1", "--zero-shard-size", "2"])
        self.assertEqual(runs.Setting("z3-p1-g2", 4).flags(), s.flags())
        self.assertEqual(runs.Setting("z3", 2).prefetch, 1)  # the trainer's default
        self.assertEqual(runs.Setting("z1", 2).flags(), ["--zero", "1"])
        for bad in ("z4", "zero3", "z3-q1", "z3-p1-p2", "z0-g2", "z3-g0"):
            with self.assertRaises(ModelError, msg=bad):
                runs.Setting(bad, 4)

    def test_all_runs_hybrid_groups_only_where_they_split_the_world(self):
        got = [(s.ranks, s.name) for s in runs.settings("all", [2, 4])]
        self.assertEqual(got, [(2, "z0"), (2, "z1"), (2, "z3-p0"), (2, "z3-p1"), (4, "z0"), (4, "z1"), (4, "z3-p0"),
                               (4, "z3-p1"), (4, "z3-g2-p0"), (4, "z3-g2-p1")])
        with self.assertRaises(ModelError):
            runs.settings("z3-g2-p1", [2])


class ValidateCliTest(unittest.TestCase):
    def write(self, d, name, tr):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump(tr, f)
        return path

    def test_from_dir_compares_every_run_and_states_the_error(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "n1.rank0.json", one_rank_trace())
            self.write(d, "z3.rank0.json", zero3_trace())
            self.write(d, "z1.rank0.json", zero1_trace())
            with open(os.path.join(d, runs.MANIFEST), "w") as f:
                json.dump({"model": "synthetic", "n1": "n1.rank0.json", "tables": {},
                           "runs": [{"setting": "z3-p0", "ranks": 2, "trace": "z3.rank0.json"},
                                    {"setting": "z1", "ranks": 2, "trace": "z1.rank0.json"}]}, f)
            out = os.path.join(d, "report.md")
            run = subprocess.run([sys.executable, CLI, "--from-dir", d, "--out", out], capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, msg=run.stderr)
            with open(out) as f:
                text = f.read()
            self.assertTrue(text.startswith("# Scaling model validation"))
            for said in ("| 2 | zero 3, prefetch 0 |", "| 2 | zero 1 |", "Model error", "| 0.10 ms |",
                         "last gradient ready to the update"):
                self.assertIn(said, text)
            # The measured exposure of the ZeRO-3 run: 0.10 ms (102 us).
            row = next(line for line in text.splitlines() if line.startswith("| 2 | zero 3, prefetch 0 |"))
            self.assertEqual(row.split("|")[11].strip(), "0.10 ms")

    def test_from_traces_still_takes_two_traces_and_a_mismatch_is_one_line(self):
        with tempfile.TemporaryDirectory() as d:
            n1 = self.write(d, "n1.rank0.json", one_rank_trace())
            z3 = self.write(d, "z3.rank0.json", zero3_trace())
            run = subprocess.run([sys.executable, CLI, "--from-traces", n1, z3, "--zero-prefetch", "0"],
                                 capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, msg=run.stderr)
            self.assertIn("| 2 | zero 3, prefetch 0 |", run.stdout)
            run = subprocess.run([sys.executable, CLI, "--from-traces", n1, n1], capture_output=True, text=True)
            self.assertEqual(run.returncode, 2)
            self.assertEqual(len(run.stderr.strip().splitlines()), 1, msg=run.stderr)
            self.assertIn("N >= 2", run.stderr)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(1 if result.failures or result.errors else 0)
