#!/usr/bin/env python3
"""test_compare_torch.py: compare_torch.py's choice of PyTorch's thread
configuration, and its GPT rows (tokens/s, both sides' MFU, the flags each
side gets), with stubs for both sides (no torch, no ddp_train, a few
seconds).

The PyTorch stub stands in for the interpreter (--python): it reads the
thread flags as torch_reference.py does (--threads T; --blas-threads B,
default T), logs them, and reports a samples/s drawn fresh per test for that
configuration ("intra": T torch threads; "blas": 1 torch thread and B > 1
BLAS threads). The checks read the CSV and the table the script wrote.

Run: python3 tests/python/test_compare_torch.py  (COMPARE_TORCH=path tests another copy)
"""
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import unittest

# What the tools write is recorded (launch/ddp_tools/common/output_registry.py): in a
# registry of this run's own, not the user's ~/.local/state (removed at exit).
_STATE = tempfile.TemporaryDirectory(prefix="test_compare_torch_state_")
os.environ["XDG_STATE_HOME"] = _STATE.name

LAUNCH = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "launch"))
SCRIPT = os.environ.get("COMPARE_TORCH", os.path.join(LAUNCH, "compare_torch.py"))

TORCH_STUB = textwrap.dedent("""\
    #!/usr/bin/env python3
    import json, os, sys
    argv = sys.argv[2:]  # sys.argv[1] is torch_reference.py's path
    flag = lambda name, default: argv[argv.index(name) + 1] if name in argv else default
    torch_t = int(flag("--threads", "0"))
    blas_t = int(flag("--blas-threads", str(torch_t)))
    config = "blas" if torch_t == 1 and blas_t > 1 else "intra"
    with open(os.environ["STUB_LOG"], "a") as f:
        f.write(json.dumps({"ranks": int(flag("--ranks", "1")), "torch": torch_t, "blas": blas_t,
                            "env_omp": os.environ.get("OMP_NUM_THREADS"),
                            "env_openblas": os.environ.get("OPENBLAS_NUM_THREADS")}) + "\\n")
    rate = json.loads(os.environ["STUB_RATES"])[config]
    line = {"event": "bench", "samples_per_s": rate, "step_ms_median": 1.0,
            "torch_num_threads": torch_t, "torch": "stub"}
    if "--block-size" in argv:  # a GPT: windows of T tokens
        with open(os.environ["STUB_LOG"] + ".argv", "a") as f:
            f.write(json.dumps(argv) + "\\n")
        line["tokens_per_s"] = rate * int(flag("--block-size", "0"))
        line["mfu"] = json.loads(os.environ["STUB_MFU"])[config]
    print(json.dumps(line))
    """)

OURS_STUB = textwrap.dedent("""\
    import json, os, sys
    argv = sys.argv[1:]
    line = {"event": "bench", "samples_per_s": float(os.environ["STUB_OURS"]), "step_ms_median": 1.0}
    if "--block-size" in argv:
        with open(os.environ["STUB_LOG"] + ".ours", "a") as f:
            f.write(json.dumps(argv) + "\\n")
        line["tokens_per_s"] = line["samples_per_s"] * int(argv[argv.index("--block-size") + 1])
        line["mfu"] = float(os.environ["STUB_OURS_MFU"])
    print(json.dumps(line))
    """)


class StubbedCompare(unittest.TestCase):
    """compare_torch.py run against the two stubs, and what it wrote."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.torch_stub = os.path.join(d, "torch_stub")
        with open(self.torch_stub, "w") as f:
            f.write(TORCH_STUB)
        os.chmod(self.torch_stub, 0o755)
        self.ours_stub = os.path.join(d, "ours_stub.py")
        with open(self.ours_stub, "w") as f:
            f.write(OURS_STUB)
        self.stub_log = os.path.join(d, "stub.log")
        self.out = os.path.join(d, "cmp.md")

    def tearDown(self):
        self.tmp.cleanup()

    def run_script(self, rates, ours, *flags, models="b", mfu=None, ours_mfu=0.0):
        env = dict(os.environ, STUB_LOG=self.stub_log, STUB_RATES=json.dumps(rates), STUB_OURS=str(ours),
                   STUB_MFU=json.dumps(mfu or {}), STUB_OURS_MFU=str(ours_mfu))
        cmd = [sys.executable, SCRIPT, "--device", "cpu", "--models", models, "--modes", "eager",
               "--ours-cmd", f"{sys.executable} {self.ours_stub}", "--python", self.torch_stub,
               "--out", self.out, *flags]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)

    def rows(self):
        with open(os.path.splitext(self.out)[0] + ".csv") as f:
            return list(csv.DictReader(f))

    def stub_calls(self):
        with open(self.stub_log) as f:
            return [json.loads(line) for line in f]


class CompareTorchThreadConfigs(StubbedCompare):
    def check_better_is_reported(self, winner):
        loser = "intra" if winner == "blas" else "blas"
        rates = {loser: random.uniform(1e3, 1e5)}
        rates[winner] = rates[loser] * random.uniform(1.05, 1.5)
        ours = random.uniform(1e3, 1e5)
        p = self.run_script(rates, ours, "--threads", "2", "--repeats", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        (row,) = self.rows()
        self.assertAlmostEqual(float(row["torch_eager_samples_per_s"]), rates[winner], delta=1e-6 * rates[winner])
        self.assertEqual(row["torch_eager_threads"], winner)
        self.assertAlmostEqual(float(row["ratio_eager"]), ours / rates[winner], places=6)
        # The loser's figure stays visible: in the CSV and beside the winner in the table.
        self.assertAlmostEqual(float(row[f"torch_eager_{loser}_samples_per_s"]), rates[loser],
                               delta=1e-6 * rates[loser])
        with open(self.out) as f:
            table_row = [line for line in f if line.startswith("| b:")][0]
        self.assertIn(f"| {winner} ({loser} {rates[loser]:,.0f})", table_row)
        # Each repeat ran both configurations, the first of them turning.
        calls = [(c["torch"], c["blas"]) for c in self.stub_calls()]
        self.assertEqual(calls, [(2, 2), (1, 2), (1, 2), (2, 2)])
        self.assertEqual([(c["env_omp"], c["env_openblas"]) for c in self.stub_calls()],
                         [("2", "2"), ("1", "2"), ("1", "2"), ("2", "2")])

    def test_blas_pool_config_reported_when_faster(self):
        self.check_better_is_reported("blas")

    def test_intra_config_reported_when_faster(self):
        self.check_better_is_reported("intra")

    def test_flag_picks_one_configuration(self):
        rates = {"intra": random.uniform(1e3, 1e4), "blas": random.uniform(2e4, 1e5)}
        p = self.run_script(rates, 5e4, "--threads", "2", "--repeats", "1", "--torch-threads-configs", "intra")
        self.assertEqual(p.returncode, 0, p.stderr)
        (row,) = self.rows()
        self.assertEqual(row["torch_eager_threads"], "intra")
        self.assertAlmostEqual(float(row["torch_eager_samples_per_s"]), rates["intra"], delta=1e-6 * rates["intra"])
        self.assertEqual([(c["torch"], c["blas"]) for c in self.stub_calls()], [(2, 2)])

    def test_one_thread_runs_the_single_distinct_configuration_once(self):
        rates = {"intra": random.uniform(1e3, 1e5), "blas": random.uniform(1e3, 1e5)}
        p = self.run_script(rates, 5e4, "--threads", "1", "--repeats", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([(c["torch"], c["blas"]) for c in self.stub_calls()], [(1, 1), (1, 1)])  # once per repeat
        (row,) = self.rows()
        self.assertEqual(row["torch_eager_intra_samples_per_s"], row["torch_eager_blas_samples_per_s"])
        with open(self.out) as f:
            self.assertIn("intra = blas at 1 thread(s)", f.read())

    def test_unknown_configuration_is_a_one_line_error(self):
        p = self.run_script({"intra": 1.0, "blas": 1.0}, 1.0, "--torch-threads-configs", "intra,fast")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--torch-threads-configs: unknown configuration 'fast'", p.stderr)
        self.assertNotIn("Traceback", p.stderr)


class CompareTorchGptRows(StubbedCompare):
    """Model g (the README's GPT) beside an MLP row: its row is in tokens/s
    (each side's own tokens_per_s), its ratio against PyTorch's better
    configuration, both sides' MFU in its own table; the MLP row keeps its
    samples/s table. GPT-2 124M (gpt2) is refused on CPU in one line."""

    def read_lines(self, suffix):
        with open(self.stub_log + suffix) as f:
            return [json.loads(line) for line in f]

    def test_gpt_row_is_tokens_per_second_against_the_better_configuration(self):
        rates = {"intra": random.uniform(5, 50), "blas": random.uniform(5, 50)}
        winner = max(rates, key=rates.get)
        mfu = {"intra": random.uniform(0.01, 0.5), "blas": random.uniform(0.01, 0.5)}
        ours, ours_mfu = random.uniform(5, 50), random.uniform(0.01, 0.5)
        p = self.run_script(rates, ours, "--threads", "2", "--repeats", "1", models="b,g", mfu=mfu,
                            ours_mfu=ours_mfu)
        self.assertEqual(p.returncode, 0, p.stderr)
        mlp, gpt = self.rows()
        self.assertEqual((mlp["model"], mlp["unit"], gpt["model"], gpt["unit"]), ("b", "samples/s", "g", "tokens/s"))
        self.assertAlmostEqual(float(gpt["ours_tokens_per_s"]), ours * 128, delta=1e-6 * ours * 128)
        self.assertAlmostEqual(float(gpt["torch_eager_tokens_per_s"]), rates[winner] * 128,
                               delta=1e-6 * rates[winner] * 128)
        self.assertEqual(gpt["torch_eager_threads"], winner)
        self.assertAlmostEqual(float(gpt["ratio_eager"]), ours / rates[winner], places=6)
        self.assertAlmostEqual(float(gpt["ours_mfu"]), ours_mfu, places=9)
        self.assertAlmostEqual(float(gpt["torch_eager_mfu"]), mfu[winner], places=9)
        self.assertEqual(gpt["batch_per_rank"], "16")
        # The MLP row is what it was: samples/s, in the table with the samples/s header.
        self.assertAlmostEqual(float(mlp["ours_samples_per_s"]), ours, delta=1e-6 * ours)
        with open(self.out) as f:
            text = f.read()
        mlp_table, gpt_table = text.split("\n\n| model")[1:]
        self.assertIn("ours samples/s", mlp_table)
        self.assertIn("| b: 10-10 mse |", mlp_table)
        self.assertNotIn("| g:", mlp_table)
        self.assertIn("ours tokens/s", gpt_table)
        (g_line,) = [line for line in gpt_table.splitlines() if line.startswith("| g:")]
        self.assertIn(f"| {ours * 128:,.0f} |", g_line)
        self.assertIn(f"| {ours / rates[winner]:.2f} |", g_line)
        self.assertTrue(g_line.endswith(f"| {100 * ours_mfu:.1f}% | {100 * mfu[winner]:.1f}% | n/a |"), g_line)

    def test_each_side_gets_the_readme_gpt_and_adamw(self):
        p = self.run_script({"intra": 10.0, "blas": 10.0}, 10.0, "--threads", "1", "--repeats", "1",
                            models="g", mfu={"intra": 0.1, "blas": 0.1})
        self.assertEqual(p.returncode, 0, p.stderr)
        (ours,), (torch,) = self.read_lines(".ours"), self.read_lines(".argv")
        for argv in (ours, torch):
            given = {flag: argv[i + 1] for i, flag in enumerate(argv[:-1]) if flag.startswith("--")}
            want = {"--model": "gpt", "--n-layer": "4", "--n-head": "4", "--n-embd": "128", "--block-size": "128",
                    "--vocab-size": "256", "--batch-size": "16", "--lr": "2e-3", "--weight-decay": "0.1",
                    "--device": "cpu"}
            self.assertEqual({k: given.get(k) for k in want}, want, argv)
            self.assertNotIn("--layers", argv)
        self.assertEqual(ours[ours.index("--optimizer") + 1], "adamw")
        self.assertNotIn("--optimizer", torch)  # torch_reference.py's GPT is AdamW by itself

    def test_precision_bf16_reaches_both_sides_and_the_header(self):
        for precision in ("bf16", "fp16"):
            for suffix in (".ours", ".argv"):
                if os.path.exists(self.stub_log + suffix):
                    os.remove(self.stub_log + suffix)
            flags = ["--precision", precision] if precision == "bf16" else []
            p = self.run_script({"intra": 10.0, "blas": 10.0}, 10.0, "--threads", "1", "--repeats", "1", *flags,
                                models="g", mfu={"intra": 0.1, "blas": 0.1})
            self.assertEqual(p.returncode, 0, p.stderr)
            (ours,), (torch,) = self.read_lines(".ours"), self.read_lines(".argv")
            for argv in (ours, torch):
                if precision == "bf16":
                    self.assertEqual(argv[argv.index("--precision") + 1], "bf16", argv)
                else:  # the default is left out: the commands are what they were
                    self.assertNotIn("--precision", argv)
            with open(self.out) as f:
                self.assertIn(f"precision: {precision}", f.read())

    def test_gpt2_on_cpu_is_a_one_line_error(self):
        p = self.run_script({"intra": 1.0, "blas": 1.0}, 1.0, models="g,gpt2")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("model gpt2 (GPT-2 124M) runs on --device cuda only", p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        self.assertFalse(os.path.exists(self.stub_log), "nothing ran")


class CompareTorchOutputs(StubbedCompare):
    def test_a_users_file_beside_out_is_refused_before_any_run(self):
        # The .csv beside --out is the user's: refused before the first run, unless --overwrite;
        # once compare_torch has written it (the table too, rewritten after every run), it is its own.
        mine = os.path.splitext(self.out)[0] + ".csv"
        with open(mine, "w") as f:
            f.write("my,notes\n")
        rates = {"intra": 2e4, "blas": 1e4}
        p = self.run_script(rates, 3e4, "--threads", "1")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertIn("cmp.csv: exists and is not a file ddp_train wrote", p.stderr)
        self.assertFalse(os.path.exists(self.stub_log), "a run started before the refusal")
        with open(mine) as f:
            self.assertEqual(f.read(), "my,notes\n")
        p = self.run_script(rates, 3e4, "--threads", "1", "--overwrite")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"replacing {mine} (--overwrite)", p.stderr)
        p = self.run_script(rates, 3e4, "--threads", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        for path in (self.out, mine):
            self.assertIn(f"replacing {path} (written by compare_torch.py --out at", p.stderr)


if __name__ == "__main__":
    unittest.main()
