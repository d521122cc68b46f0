#!/usr/bin/env python3
"""test_trace_schema.py: `ddp_train --trace` on 2 CPU ranks, merged by launch/merge_traces.py.

    test_trace_schema.py DDP_TRAIN MPIEXEC

Checks the merged file against the Chrome trace-event JSON Object Format that
Perfetto and chrome://tracing read (the keys and types of every complete "X" and
metadata "M" event), and the timeline's meaning: per rank and traced step one
step span holding every layer's forward (ascending) and backward (descending),
each gradient bucket's collective exactly once, called during its ready layer's
backward and done before the optimizer, the buckets one after another, and the
two ranks' copies of each collective overlapping in the merged clock (the
alignment). At --zero 3 every layer's weights are gathered before its forward and
before its backward. Bad --trace flags are refused in one line.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

# What the tools write is recorded (launch/ddp_tools/common/output_registry.py): in a
# registry of this run's own, not the user's ~/.local/state (removed at exit).
_STATE = tempfile.TemporaryDirectory(prefix="test_trace_schema_state_")
os.environ["XDG_STATE_HOME"] = _STATE.name

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MERGE = os.path.join(REPO, "launch", "merge_traces.py")
TRAINER = MPIEXEC = None
FIRST, LAST = 3, 10
# Tolerances, microseconds: clocks are read on different threads (and, merged,
# different processes aligned at one barrier) of an oversubscribed host.
SLACK_US = 200.0
ALIGN_SLACK_US = 5000.0
CLOCK_OFFSET_US = 10e6
GATHER_SLACK_US = 1.0


def run_ranks(n, out, extra, steps=12, last=LAST):
    cmd = [MPIEXEC, "-np", str(n), "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    cmd += [TRAINER, "--device", "cpu", "--threads", "1", "--data", "synthetic", "--synthetic-samples", "512",
            "--layers", "10,256,256,256,10", "--batch-size", "16", "--steps", str(steps), "--log-every", "4",
            "--bucket-mb", "0.1", "--first-bucket-mb", "0.05", "--trace", os.path.join(out, "run.json"),
            "--trace-steps", "%d:%d" % (FIRST, last)] + extra
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env,
                       timeout=300)
    if p.returncode != 0:
        raise AssertionError("ddp_train failed (%d):\n%s" % (p.returncode, p.stdout[-3000:]))
    # On one host the ranks' steady clocks agree; on several they need not.
    # Rank 1's clock is moved by 10 s, as another host's could be: merging
    # must align it at the barrier (clock_sync_ts) all the same.
    rank1 = os.path.join(out, "run.rank1.json")
    with open(rank1) as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        if "ts" in e:
            e["ts"] += CLOCK_OFFSET_US
        if "called_ts" in e.get("args", {}):
            e["args"]["called_ts"] += CLOCK_OFFSET_US
    doc["otherData"]["clock_sync_ts"] += CLOCK_OFFSET_US
    with open(rank1, "w") as f:
        json.dump(doc, f)
    merged = os.path.join(out, "merged.json")
    p = subprocess.run([sys.executable, MERGE, os.path.join(out, "run.json"), "-o", merged], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError("merge_traces failed: " + p.stdout)
    with open(merged) as f:
        return json.load(f)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_schema(test, doc):
    test.assertIsInstance(doc.get("traceEvents"), list)
    test.assertIn(doc.get("displayTimeUnit"), ("ms", "ns"))
    for e in doc["traceEvents"]:
        test.assertIn(e.get("ph"), ("X", "M", "i"), e)
        test.assertIsInstance(e.get("name"), str, e)
        test.assertIsInstance(e.get("pid"), int, e)
        test.assertIsInstance(e.get("tid"), int, e)
        test.assertIsInstance(e.get("args"), dict, e)
        if e["ph"] == "M":
            test.assertIn(e["name"], ("process_name", "thread_name"), e)
            test.assertIsInstance(e["args"].get("name"), str, e)
        elif e["ph"] == "i":  # an instant: thread-scoped, no duration
            test.assertEqual((e.get("s"), e.get("cat")), ("t", "bucket_ready"), e)
            test.assertTrue(is_num(e.get("ts")) and "dur" not in e, e)
            test.assertTrue(isinstance(e["args"].get("step"), int) and isinstance(e["args"].get("bucket"), int), e)
        else:
            test.assertIsInstance(e.get("cat"), str, e)
            test.assertTrue(is_num(e.get("ts")) and is_num(e.get("dur")) and e["dur"] >= 0, e)
            test.assertTrue(isinstance(e["args"].get("step"), int), e)


def spans(doc, rank, step, cat, tid=0, ph="X"):
    return sorted((e for e in doc["traceEvents"] if e.get("ph") == ph and e["pid"] == rank and e["tid"] == tid and
                   e["cat"] == cat and e["args"]["step"] == step), key=lambda e: e["ts"])


def end(e):
    return e["ts"] + e["dur"]


class TraceSchema(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        out = os.path.join(cls.tmp.name, "ddp")
        os.makedirs(out)
        cls.ddp = run_ranks(2, out, [])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_merged_file_is_chrome_trace_json(self):
        check_schema(self, self.ddp)
        names = {(e["pid"], e["tid"], e["args"]["name"]) for e in self.ddp["traceEvents"] if e["ph"] == "M"}
        for r in (0, 1):
            self.assertIn((r, 0, "rank %d" % r), names)
            self.assertIn((r, 0, "compute"), names)
            self.assertIn((r, 1, "communication"), names)
        self.assertEqual(self.ddp["otherData"]["world_size"], 2)

    def test_each_step_holds_every_layer_in_order(self):
        for r, other in enumerate(self.ddp["otherData"]["ranks"]):
            self.assertEqual(other["steps_traced"], [FIRST, LAST])
            layers = len(other["layers"])
            for s in range(FIRST, LAST + 1):
                (step,) = spans(self.ddp, r, s, "step")
                fwd, bwd = spans(self.ddp, r, s, "forward"), spans(self.ddp, r, s, "backward")
                self.assertEqual([e["args"]["layer"] for e in fwd], list(range(layers)))
                self.assertEqual([e["args"]["layer"] for e in bwd], list(reversed(range(layers))))
                inner = fwd + bwd + spans(self.ddp, r, s, "loss") + spans(self.ddp, r, s, "comm_wait") + \
                    spans(self.ddp, r, s, "optimizer") + spans(self.ddp, r, s, "upload")
                inner.sort(key=lambda e: e["ts"])
                for a, b in zip(inner, inner[1:]):
                    self.assertLessEqual(end(a), b["ts"] + 1e-3, (a["name"], b["name"]))  # no overlap on tid 0
                self.assertGreaterEqual(inner[0]["ts"], step["ts"])
                self.assertLessEqual(end(inner[-1]), end(step) + 1e-3)

    def test_every_bucket_is_placed_against_its_backward(self):
        for r, other in enumerate(self.ddp["otherData"]["ranks"]):
            buckets = other["buckets"]
            self.assertGreater(len(buckets), 2, "the test's bucket caps should give several buckets")
            overlapped = 0
            for s in range(FIRST, LAST + 1):
                comm = spans(self.ddp, r, s, "comm", tid=1)
                self.assertEqual([e["args"]["bucket"] for e in comm], list(range(len(buckets))))
                bwd = {e["args"]["layer"]: e for e in spans(self.ddp, r, s, "backward")}
                (opt,) = spans(self.ddp, r, s, "optimizer")
                ready_marks = spans(self.ddp, r, s, "bucket_ready", ph="i")
                self.assertEqual([e["args"]["bucket"] for e in ready_marks], list(range(len(buckets))))
                for mark, b in zip(ready_marks, buckets):  # on the compute timeline, inside the backward
                    ready = bwd[b["ready_after_layer"]]
                    self.assertTrue(ready["ts"] <= mark["ts"] <= end(ready), (mark, ready))
                for e, b in zip(comm, buckets):
                    self.assertEqual(e["args"]["op"], "all-reduce")
                    self.assertEqual(e["args"]["elements"], b["elements"])
                    ready = bwd[b["ready_after_layer"]]
                    # Started by the reducer inside the backward that finished it ...
                    self.assertGreaterEqual(e["args"]["called_ts"], ready["ts"] - SLACK_US, e)
                    self.assertLessEqual(e["args"]["called_ts"], end(ready) + SLACK_US, e)
                    # ... run once called, and done before the optimizer reads the sums.
                    self.assertGreaterEqual(e["ts"], e["args"]["called_ts"] - SLACK_US, e)
                    self.assertLessEqual(end(e), opt["ts"] + SLACK_US, e)
                    if b["ready_after_layer"] > 0 and e["args"]["called_ts"] < bwd[0]["ts"]:
                        overlapped += 1  # called while lower layers' backward was still to run
                for a, b in zip(comm, comm[1:]):
                    self.assertLessEqual(end(a), b["ts"] + SLACK_US)  # one at a time, in bucket order
            self.assertGreater(overlapped, 0, "no bucket started while backward ran: no overlap traced")

    def test_ranks_copies_of_a_collective_overlap_once_merged(self):
        for s in range(FIRST, LAST + 1):
            a, b = spans(self.ddp, 0, s, "comm", tid=1), spans(self.ddp, 1, s, "comm", tid=1)
            self.assertEqual(len(a), len(b))
            for x, y in zip(a, b):
                # Neither rank's copy can end before the other's begins.
                self.assertLessEqual(max(x["ts"], y["ts"]), min(end(x), end(y)) + ALIGN_SLACK_US, (s, x["name"]))

    def test_zero3_gathers_each_layer_before_its_forward_and_backward(self):
        out = os.path.join(self.tmp.name, "zero3")
        os.makedirs(out)
        doc = run_ranks(2, out, ["--zero", "3", "--zero-prefetch", "0"])
        check_schema(self, doc)
        for r in (0, 1):
            for s in range(FIRST, LAST + 1):
                comm = spans(doc, r, s, "comm", tid=1)
                # Without prefetch each layer's gather is started and waited
                # for in the layer point before the layer's span opens.
                layer_spans = spans(doc, r, s, "forward") + spans(doc, r, s, "backward")
                for layer_span in layer_spans:
                    layer = layer_span["args"]["layer"]
                    before = [e for e in comm + layer_spans if end(e) <= layer_span["ts"] + GATHER_SLACK_US]
                    self.assertTrue(before, (r, s, layer_span["name"]))
                    last = max(before, key=end)  # what ran last before the layer: its own gather
                    self.assertEqual((last["cat"], last["args"].get("op"), last["args"].get("layer")),
                                     ("comm", "all-gather", layer), (r, s, layer_span["name"], last["name"]))
                self.assertTrue(all(e["args"]["op"] == "reduce-scatter" for e in comm if "bucket" in e["args"]))

    def test_zero3_prefetched_gathers_end_before_their_layer_and_run_under_the_one_before(self):
        out = os.path.join(self.tmp.name, "zero3_prefetch")
        os.makedirs(out)
        doc = run_ranks(2, out, ["--zero", "3", "--zero-prefetch", "1"])
        check_schema(self, doc)
        under = 0
        for r in (0, 1):
            for s in range(FIRST, LAST + 1):
                comm = spans(doc, r, s, "comm", tid=1)
                # The gathers run on the communication thread in the
                # schedule's order (forward, then backward), the k-th for
                # the k-th layer span, and each ends before its layer's
                # span opens (the hook waits for it).
                gathers = [e for e in comm if e["args"]["op"] == "all-gather"]
                layer_spans = sorted(spans(doc, r, s, "forward") + spans(doc, r, s, "backward"), key=lambda e: e["ts"])
                self.assertEqual(len(gathers), len(layer_spans), (r, s))
                for gather, layer_span in zip(gathers, layer_spans):
                    self.assertEqual(gather["args"]["layer"], layer_span["args"]["layer"], (r, s, gather["name"]))
                    self.assertLessEqual(end(gather), layer_span["ts"] + GATHER_SLACK_US, (r, s, gather["name"]))
                # Prefetched: the next layer's gather starts before this layer's span ends.
                for gather, previous in zip(gathers[1:], layer_spans):
                    under += gather["ts"] < end(previous)
        self.assertGreater(under, 0, "no gather started while the layer before it ran: nothing prefetched")

    def test_zero1_accumulation_and_a_window_to_the_last_step(self):
        out = os.path.join(self.tmp.name, "zero1")
        os.makedirs(out)
        # The window ends with the run (written at its end, before the final evaluation),
        # evaluations fall inside it.
        doc = run_ranks(2, out, ["--zero", "1", "--grad-accum", "2", "--eval-every", "5"], steps=12, last=12)
        check_schema(self, doc)
        gathered = {}
        for r, other in enumerate(doc["otherData"]["ranks"]):
            self.assertEqual(other["steps_traced"], [FIRST, 12])
            self.assertEqual(other["micro_batches"], 2)
            self.assertEqual(other["precision"], "fp16")  # --precision's default, recorded
            layers, buckets = len(other["layers"]), len(other["buckets"])
            for s in range(FIRST, 13):
                fwd = spans(doc, r, s, "forward")
                self.assertEqual([e["args"]["layer"] for e in fwd], list(range(layers)) * 2)  # two micro-batches
                comm = spans(doc, r, s, "comm", tid=1)
                grads = [e for e in comm if "bucket" in e["args"]]
                self.assertEqual([(e["args"]["bucket"], e["args"]["op"]) for e in grads],
                                 [(b, "reduce-scatter") for b in range(buckets)])  # the last micro-batch only
                second_bwd = [e for e in spans(doc, r, s, "backward")][layers:]
                self.assertGreaterEqual(min(e["args"]["called_ts"] for e in grads), second_bwd[0]["ts"] - SLACK_US)
                (opt,) = spans(doc, r, s, "optimizer")
                # The weights after the update: all-gathered chunk by chunk (the buckets' ranges),
                # started in the optimizer's span and left to run under the next forward.
                gathers = [e for e in comm if e["args"]["op"] == "all-gather"]
                self.assertGreaterEqual(len(gathers), 1)
                self.assertTrue(all(opt["ts"] - SLACK_US <= g["args"]["called_ts"] <= end(opt) + SLACK_US
                                    for g in gathers), (r, s))
                self.assertEqual(sum(g["args"]["elements"] for g in gathers), gathered.setdefault(r, sum(
                    g["args"]["elements"] for g in gathers)), "every step gathers the whole layout")
            self.assertEqual([e["args"]["step"] for e in doc["traceEvents"] if e.get("cat") == "eval" and
                              e["pid"] == r], [5, 8, 10])  # --eval-every 5 and the epoch's end (64 of 512 rows a step)

    def test_bad_trace_flags_are_refused_in_one_line(self):
        base = [TRAINER, "--device", "cpu", "--data", "synthetic", "--steps", "3"]
        bad = os.path.join(self.tmp.name, "bad.json")
        for argv, needle in ((["--trace", bad, "--trace-steps", "5:2"], "--trace-steps"),
                             (["--trace", bad, "--cuda-graph"], "--trace"),
                             (["--trace-steps", "1:2"], "--trace-steps needs --trace"),
                             (["--trace", ""], "--trace: the path is empty"),
                             (["--trace", os.path.join(self.tmp.name, "no", "such", "dir", "t.json")], "--trace"),
                             (["--trace", bad, "--eval-only", "--init-weights", self.tmp.name], "--trace")):
            argv = (base if "--eval-only" not in argv else base[:-2]) + argv
            p = subprocess.run(argv, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
            self.assertNotEqual(p.returncode, 0)
            lines = [l for l in p.stderr.splitlines() if l.strip()]
            self.assertEqual(len(lines), 1, p.stderr)
            self.assertIn(needle, lines[0])
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "bad.rank0.json")))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: test_trace_schema.py DDP_TRAIN MPIEXEC", file=sys.stderr)
        sys.exit(2)
    TRAINER, MPIEXEC = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1] + sys.argv[3:], verbosity=2)
