#!/usr/bin/env python3
"""test_bench_activation_memory.py: launch/bench_activation_memory.py against
the built ddp_train in --quick mode (a tiny GPT, a few seconds), and against
a stub binary that has all three of issue 30's flags and the activation split
in its --bench line (and a PyTorch stub), reading back the table it wrote.

With the real binary: every memory cell of the table is its run's JSON
figure (peak_allocated_bytes_per_rank, state_bytes_per_rank, and peak - state
marked as measured-with-scratch where the line has no split); the axes the
binary's --help lacks read n/a and the memory target "not evaluable" naming
them; the chunked classifier's runs were given --classifier-chunk; the
largest batch is the affine fit's through the two batches' peaks.
With the stub: the whole grid (3 x 2 x 2 settings) ran with each flag
combination, the split's figures and formula are the table's, and the two
targets read PASS or FAIL as the stubs' figures say.
A missing binary is one line, exit status 2, nothing written.

Run: python3 tests/python/test_bench_activation_memory.py [build/ddp_train]
(PYTHONPATH=launch; /usr/bin/python3 with torch runs the PyTorch side too,
else it is left out)
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest

# What the tools write is recorded (launch/ddp_tools/common/output_registry.py): in a
# registry of this run's own, not the user's ~/.local/state (removed at exit).
_STATE = tempfile.TemporaryDirectory(prefix="test_bench_activation_memory_state_")
os.environ["XDG_STATE_HOME"] = _STATE.name

LAUNCH = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "launch"))
SCRIPT = os.path.join(LAUNCH, "bench_activation_memory.py")
BINARY = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(LAUNCH), "build", "ddp_train")
MIB = float(1 << 20)

# A ddp_train with --recompute, --attention and --classifier-chunk, whose
# --bench line carries the activation split: activations per window are a
# product of per-axis factors (STUB_FACTORS), the state fixed.
OURS_STUB = textwrap.dedent("""\
    import json, os, sys
    argv = sys.argv[1:]
    if "--help" in argv:
        print("ddp_train stub\\n\\nGeneral:\\n  -h [ --help ]   show this help")
        print("  --bench                               time the step")
        print("  --recompute arg (=none)               none | light | block")
        print("  --attention arg (=fused)              explicit | fused")
        print("  --classifier-chunk arg (=0)           rows")
        print("  --batch-size arg (=128)               samples")
        sys.exit(0)
    flag = lambda name: argv[argv.index(name) + 1]
    with open(os.environ["STUB_LOG"], "a") as f:
        f.write(json.dumps(argv) + "\\n")
    factors = json.loads(os.environ["STUB_FACTORS"])
    b, t = int(flag("--batch-size")), int(flag("--block-size"))
    per_window = 1 << 20
    for key in ("--recompute", "--attention"):
        per_window *= factors[flag(key)]
    per_window *= factors["chunked" if flag("--classifier-chunk") != "0" else "unchunked"]
    act = int(per_window * b)
    state = 3 << 20
    parts = {}
    for p in ("attention", "mlp", "layernorm", "classifier", "residual"):
        parts[f"activation_{p}_bytes"] = act // 5
        parts[f"activation_{p}_formula_bytes"] = act // 5 + 7
    line = {"event": "bench", "tokens_per_s": float(os.environ["STUB_OURS_TPS"]), "samples_per_s": 1.0,
            "peak_allocated_bytes_per_rank": state + act + 4096 * b, "state_bytes_per_rank": state,
            "activation_bytes": act, "activation_formula_bytes": act + 1000 * b, **parts}
    print(json.dumps(line))
    """)

TORCH_STUB = textwrap.dedent("""\
    import json, os, sys
    print(json.dumps({"event": "bench", "peer": "pytorch", "tokens_per_s": float(os.environ["STUB_TORCH_TPS"]),
                      "attention": "explicit", "torch": "stub"}))
    """)


def table_rows(text, section):
    """The rows of the first Markdown table under '## section', as lists of cells."""
    part = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in part.splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            break  # the first table ends: a section may hold another (the activations by part)
    return rows[2:]  # past the header and the --- row


def fmt(v):
    return f"{v / MIB:.2f}"


def chunk_label(value):
    """The table's classifier cell for a setting's classifier_chunk value."""
    if value.endswith("+drop"):
        return "on (32 rows, logits dropped)"
    return "off" if value == "0" else "on (32 rows)"


class Runner(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "mem.md")

    def tearDown(self):
        self.tmp.cleanup()

    def run_script(self, *flags, env=None):
        e = dict(os.environ, PYTHONPATH=LAUNCH + os.pathsep + os.environ.get("PYTHONPATH", ""))
        e.update(env or {})
        return subprocess.run([sys.executable, SCRIPT, "--quick", "--out", self.out, *flags], env=e,
                              capture_output=True, text=True, timeout=240)

    def runs(self):
        with open(os.path.splitext(self.out)[0] + ".runs.jsonl") as f:
            return [json.loads(line) for line in f]

    def text(self):
        with open(self.out) as f:
            return f.read()


@unittest.skipUnless(os.access(BINARY, os.X_OK), f"no ddp_train at {BINARY}")
class RealBinary(Runner):
    def test_quick_table_matches_the_json(self):
        have_torch = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0
        flags = ["--ddp-train", BINARY, "--threads", "1", "--budget-gib", "0.01"] + ([] if have_torch else ["--no-torch"])
        p = self.run_script(*flags)
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
        text = self.text()
        help_text = subprocess.run([BINARY, "--help"], capture_output=True, text=True).stdout
        has = {flag: re.search(rf"^  --{flag}\b", help_text, re.M) is not None
               for flag in ("recompute", "attention", "classifier-chunk", "classifier-logits")}
        self.assertTrue(has["classifier-chunk"], "the binary has --classifier-chunk (merged)")

        # Every ours run: its row holds its JSON's figures.
        rows = table_rows(text, "Memory and tokens/s by setting")
        ours = [r for r in self.runs() if r["side"] == "ours"]
        self.assertTrue(ours and all(r["status"] == "ok" for r in ours), [r.get("error") for r in ours])
        chunk_values = {r["setting"].get("classifier_chunk") for r in ours}
        # Off, on at --chunk-rows (quick: 32), and on with the logits dropped
        # where the binary has --classifier-logits.
        self.assertEqual(chunk_values, {"0", "32", "32+drop"} if has["classifier-logits"] else {"0", "32"})
        for r in ours:
            value = r["setting"]["classifier_chunk"]
            self.assertIn(f"--classifier-chunk {value.replace('+drop', '')}", r["cmd"])
            self.assertEqual("--classifier-logits drop" in r["cmd"], value.endswith("+drop"), r["cmd"])
            res = r["result"]
            chunk = chunk_label(value)
            axes = [r["setting"].get(k) or "n/a" for k in ("recompute", "attention")]
            (row,) = [x for x in rows if x[:2] == axes and x[2] == chunk and x[3] == str(r["batch"])]
            peak, state = res["peak_allocated_bytes_per_rank"], res["state_bytes_per_rank"]
            self.assertEqual(row[4], fmt(peak))
            self.assertEqual(row[5], fmt(state))
            if "activation_bytes" in res:
                self.assertEqual(row[6], fmt(res["activation_bytes"]))
                self.assertEqual(row[7], fmt(res["activation_formula_bytes"]))
            else:  # no split in the line: peak - state, marked, and no formula
                self.assertEqual(row[6], fmt(peak - state) + " *")
                self.assertEqual(row[7], "n/a")
            # The axes the binary lacks are n/a in every row, the others a value.
            for col, flag in ((0, "recompute"), (1, "attention")):
                self.assertEqual(row[col] == "n/a", not has[flag], row)
        missing = [f"--{f}" for f in ("recompute", "attention") if not has[f]]
        (mem_target, speed_target) = table_rows(text, "Targets (issue 30)")
        if missing:
            self.assertIn("not evaluable", mem_target[2])
            for flag in missing:
                self.assertIn(flag, mem_target[2])
                self.assertRegex(text, rf"axes not available[^\n]*{flag}")
        else:
            self.assertIn(mem_target[2], ("PASS", "FAIL"))

        # The largest batch: the line through batches 2 and 4, against the budget.
        fits = table_rows(text, "Largest batch in the budget")
        budget = 0.01 * (1 << 30)
        settings = {(r["setting"].get("recompute"), r["setting"].get("attention"), r["setting"]["classifier_chunk"])
                    for r in ours}
        for recompute, attention, chunk in sorted(settings, key=str):
            label = chunk_label(chunk)
            axes = [recompute or "n/a", attention or "n/a"]
            peaks = {r["batch"]: r["result"]["peak_allocated_bytes_per_rank"] for r in ours
                     if (r["setting"].get("recompute"), r["setting"].get("attention"),
                         r["setting"]["classifier_chunk"]) == (recompute, attention, chunk)}
            slope = (peaks[4] - peaks[2]) / 2
            intercept = peaks[2] - 2 * slope
            largest = math.floor((budget - intercept) / slope)
            self.assertLessEqual(intercept + slope * largest, budget)
            self.assertGreater(intercept + slope * (largest + 1), budget)
            (row,) = [x for x in fits if x[:2] == axes and x[2] == label]
            self.assertEqual(row[5], str(largest))
            self.assertIn(f"{fmt(peaks[3])} / {fmt(intercept + 3 * slope)} at B 3", row[4])
        # The speed target: a figure when PyTorch ran, its ratio from the two medians.
        if have_torch:
            torch = [r for r in self.runs() if r["side"] == "torch"]
            self.assertTrue(torch and all(r["status"] == "ok" for r in torch), [r.get("error") for r in torch])
            self.assertIn(speed_target[2], ("PASS", "FAIL"))
        else:
            self.assertIn("not evaluable", speed_target[2])


class StubBinary(Runner):
    def setUp(self):
        super().setUp()
        d = self.tmp.name
        self.stub = os.path.join(d, "ddp_train")
        with open(self.stub, "w") as f:
            f.write(f"#!{sys.executable}\n" + OURS_STUB)
        os.chmod(self.stub, 0o755)
        self.torch_stub = os.path.join(d, "python_stub")
        with open(self.torch_stub, "w") as f:
            f.write(f"#!{sys.executable}\n" + TORCH_STUB)
        os.chmod(self.torch_stub, 0o755)
        self.log = os.path.join(d, "stub.log")

    def run_stub(self, factors, ours_tps, torch_tps):
        return self.run_script("--ddp-train", self.stub, "--python", self.torch_stub, "--threads", "2",
                               "--repeats", "2",
                               env={"STUB_LOG": self.log, "STUB_FACTORS": json.dumps(factors),
                                    "STUB_OURS_TPS": str(ours_tps), "STUB_TORCH_TPS": str(torch_tps)})

    def test_full_grid_split_and_passing_targets(self):
        # baseline (none, explicit, unchunked) against (block, fused, chunked): 2 x 2 x 1.5 = 6x
        factors = {"none": 2.0, "light": 1.5, "block": 1.0, "explicit": 2.0, "fused": 1.0,
                   "unchunked": 1.5, "chunked": 1.0}
        p = self.run_stub(factors, 3000, 1000)
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
        with open(self.log) as f:
            calls = [json.loads(line) for line in f]
        seen = {(c[c.index("--recompute") + 1], c[c.index("--attention") + 1], c[c.index("--classifier-chunk") + 1])
                for c in calls}
        self.assertEqual(seen, {(r, a, ch) for r in ("none", "light", "block") for a in ("explicit", "fused")
                                for ch in ("0", "32")})
        text = self.text()
        self.assertNotIn(" * |", text)  # the split was used, not peak - state
        rows = table_rows(text, "Memory and tokens/s by setting")
        self.assertEqual(len(rows), 12 * 3)  # batches 2, 4 and the check batch 3
        (row,) = [r for r in rows if r[:4] == ["none", "explicit", "off", "4"]]
        act = int((1 << 20) * 2.0 * 2.0 * 1.5 * 4)
        self.assertEqual(row[6], fmt(act))
        self.assertEqual(row[7], fmt(act + 4000))
        mem, speed = table_rows(text, "Targets (issue 30)")
        self.assertIn("= 6.00x", mem[1])
        self.assertEqual(mem[2], "PASS")
        self.assertIn("= 3.00x", speed[1])
        self.assertEqual(speed[2], "PASS")
        self.assertIn("Activations by part", text)
        # The speed row is at the binary's defaults as its --help prints them (fused, not the first path).
        (ours_speed,) = [r for r in table_rows(text, "Ours against PyTorch") if r[0] == "ours"]
        self.assertIn("attention fused", ours_speed[1])
        self.assertIn("the binary's defaults", ours_speed[1])

    def test_targets_fail_when_the_figures_fall_short(self):
        factors = {"none": 1.5, "light": 1.2, "block": 1.0, "explicit": 1.5, "fused": 1.0,
                   "unchunked": 1.2, "chunked": 1.0}  # 2.7x
        p = self.run_stub(factors, 1200, 1000)
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
        mem, speed = table_rows(self.text(), "Targets (issue 30)")
        self.assertIn("= 2.70x", mem[1])
        self.assertEqual(mem[2], "FAIL")
        self.assertIn("= 1.20x", speed[1])
        self.assertEqual(speed[2], "FAIL")

    def test_missing_binary_is_one_line(self):
        missing = os.path.join(self.tmp.name, "no_such_ddp_train")
        p = self.run_script("--ddp-train", missing)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn(missing, p.stderr)
        self.assertFalse(os.path.exists(self.out))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
