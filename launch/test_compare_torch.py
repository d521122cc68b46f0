#!/usr/bin/env python3
"""test_compare_torch.py: compare_torch.py's choice of PyTorch's thread
configuration, with stubs for both sides (no torch, no ddp_train, a few
seconds).

The PyTorch stub stands in for the interpreter (--python): it reads the
thread flags as torch_reference.py does (--threads T; --blas-threads B,
default T), logs them, and reports a samples/s drawn fresh per test for that
configuration ("intra": T torch threads; "blas": 1 torch thread and B > 1
BLAS threads). The checks read the CSV and the table the script wrote.

Run: python3 launch/test_compare_torch.py  (COMPARE_TORCH=path tests another copy)
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

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.environ.get("COMPARE_TORCH", os.path.join(HERE, "compare_torch.py"))

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
    print(json.dumps({"event": "bench", "samples_per_s": rate, "step_ms_median": 1.0,
                      "torch_num_threads": torch_t, "torch": "stub"}))
    """)

OURS_STUB = textwrap.dedent("""\
    import json, os
    print(json.dumps({"event": "bench", "samples_per_s": float(os.environ["STUB_OURS"]),
                      "step_ms_median": 1.0}))
    """)


class CompareTorchThreadConfigs(unittest.TestCase):
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

    def run_script(self, rates, ours, *flags):
        env = dict(os.environ, STUB_LOG=self.stub_log, STUB_RATES=json.dumps(rates), STUB_OURS=str(ours))
        cmd = [sys.executable, SCRIPT, "--device", "cpu", "--models", "b", "--modes", "eager",
               "--ours-cmd", f"{sys.executable} {self.ours_stub}", "--python", self.torch_stub,
               "--out", self.out, *flags]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)

    def rows(self):
        with open(os.path.splitext(self.out)[0] + ".csv") as f:
            return list(csv.DictReader(f))

    def stub_calls(self):
        with open(self.stub_log) as f:
            return [json.loads(line) for line in f]

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


if __name__ == "__main__":
    unittest.main()
