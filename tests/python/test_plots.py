#!/usr/bin/python3
"""test_plots.py: launch/plot_metrics.py, launch/plot_sweep.py and
launch/metrics_to_tensorboard.py on small synthetic inputs made here with
fresh random values (the seed is printed; TEST_PLOTS_SEED=S repeats a run).

  PYTHONPATH=launch /usr/bin/python3 tests/python/test_plots.py

- the series extracted from a metrics file equal the records written
  (training and eval figures, null figures left out, a resumed file's later
  record winning), skipped steps found at --log-every 1, a skip between log
  records found from the scale's fall, a torn last line tolerated;
- the PNGs exist and are valid PNGs of sensible size, several runs on one
  plot, a series no run has skipped with a note;
- the TensorBoard event files, read back by tensorboard's EventAccumulator,
  hold the input values (as float32) at the input steps;
- bad input (missing file, garbled line, no step records, missing CSV
  column) is one line on stderr and exit 2.

Exits 77 (ctest's SKIP_RETURN_CODE) when matplotlib is missing, or when the
tensorboard package is missing and cannot be installed (no network) -- after
running the other tests, whose failures still fail it.
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import unittest

from ddp_tools.plots import metrics_series, plot_common  # launch/ is on PYTHONPATH (ctest sets it)

# What the tools write is recorded (launch/ddp_tools/common/output_registry.py): in a
# registry of this run's own, not the user's ~/.local/state (removed at exit).
_STATE = tempfile.TemporaryDirectory(prefix="test_plots_state_")
os.environ["XDG_STATE_HOME"] = _STATE.name

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.normpath(os.path.join(HERE, "..", "..", "launch"))

try:
    import numpy as np  # matplotlib's own dependency
except ImportError:
    np = None

SKIP = 77
SEED = int(os.environ.get("TEST_PLOTS_SEED") or int.from_bytes(os.urandom(4), "little"))
RNG = random.Random(SEED)
MISSING = []  # why a dependency-needing test was skipped


# The series a metrics file should give, written out here (not taken from
# metrics_series.SERIES_FIELDS, so a wrong mapping there fails the tests).
FIELDS = {"train_loss": ("step", "loss"), "eval_loss": ("eval", "test_loss"),
          "eval_accuracy": ("eval", "test_accuracy"), "loss_scale": ("step", "loss_scale"),
          "lr": ("step", "lr"), "samples_per_s": ("step", "samples_per_s"), "grad_norm": ("step", "grad_norm")}


def make_run(rng, steps, log_every, eval_every=0, skip_at=(), accuracy=True, init_scale=2.0 ** 16):
    """ddp_train-like records: the loss scale each step ran with, halved
    after a skipped step, never grown (so every fall is a skip's). Returns
    (records, truth) with truth the logged figures by series name."""
    records = [{"event": "memory", "zero_stage": 0, "world_size": 1, "state_bytes": rng.randrange(1, 10 ** 7)}]
    truth = {name: ([], []) for name in FIELDS}
    truth["skipped"] = []
    scale = init_scale
    for step in range(1, steps + 1):
        skipped = step in skip_at
        if step % log_every == 0 or step == steps:
            r = {"event": "step", "step": step, "epoch": 1, "loss": rng.uniform(0.1, 3.0), "loss_scale": scale,
                 "skipped": skipped, "lr": rng.uniform(1e-4, 0.1), "grad_norm": rng.uniform(0.1, 5.0),
                 "samples_per_s": rng.uniform(100.0, 20000.0), "allreduce_ms_per_step": 0,
                 "allreduce_hidden_fraction": 0}
            records.append(r)
            for name, (event, field) in FIELDS.items():
                if event == "step":
                    truth[name][0].append(step)
                    truth[name][1].append(r[field])
            if skipped:
                truth["skipped"].append(step)
        if eval_every and step % eval_every == 0:
            r = {"event": "eval", "step": step, "epoch": 1, "test_loss": rng.uniform(0.1, 3.0)}
            if accuracy:
                r["test_accuracy"] = rng.uniform(0.0, 1.0)
            records.append(r)
            truth["eval_loss"][0].append(step)
            truth["eval_loss"][1].append(r["test_loss"])
            if accuracy:
                truth["eval_accuracy"][0].append(step)
                truth["eval_accuracy"][1].append(r["test_accuracy"])
        if skipped:
            scale /= 2
    records.append({"event": "summary", "steps": steps, "skipped_steps": len(skip_at), "test_loss": 0.5})
    return records, truth


def write_jsonl(path, records, tail=""):
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
        f.write(tail)
    return path


def run_script(name, *args):
    return subprocess.run([sys.executable, os.path.join(LAUNCH, name)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=120)


def png_size(path):
    """(width, height) from a PNG's IHDR; AssertionError if not a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert head[12:16] == b"IHDR", f"{path} has no IHDR first"
    return struct.unpack(">II", head[16:24])


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp, name)

    def assert_one_line_error(self, done, *words):
        self.assertEqual(done.returncode, 2, done.stderr)
        lines = done.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, done.stderr)
        self.assertIn("error:", lines[0])
        self.assertNotIn("Traceback", done.stderr)
        self.assertNotIn(".py", lines[0].replace(".jsonl", ""))
        for w in words:
            self.assertIn(w, lines[0])

    def assert_png(self, path, min_px=300):
        self.assertTrue(os.path.isfile(path), path)
        width, height = png_size(path)
        self.assertGreaterEqual(min(width, height), min_px, path)
        self.assertLess(max(width, height), 3000, path)
        self.assertLess(os.path.getsize(path), 300 * 1024, path)
        import matplotlib.image
        pixels = matplotlib.image.imread(path)
        self.assertGreater(float(np.std(pixels)), 0.01, f"{path} is blank")


class SeriesExtraction(TempDirTest):
    def test_series_equal_the_records(self):
        steps, log_every, eval_every = RNG.randrange(50, 200), RNG.randrange(1, 6), RNG.randrange(10, 40)
        records, truth = make_run(RNG, steps, log_every, eval_every)
        series, notes = metrics_series.load_run(write_jsonl(self.path("run.jsonl"), records))
        self.assertEqual(notes, [])
        self.assertEqual(sorted(metrics_series.SERIES_FIELDS), sorted(FIELDS))
        for name in FIELDS:
            self.assertEqual(series[name].steps, truth[name][0], name)
            self.assertEqual(series[name].values, truth[name][1], name)
        self.assertEqual(len(series["skipped"]), 0)
        self.assertEqual(len(series["backoff"]), 0)

    def test_skipped_steps_found_at_log_every_1(self):
        steps = RNG.randrange(40, 120)
        skip_at = set(RNG.sample(range(1, steps + 1), RNG.randrange(1, 10)))
        records, truth = make_run(RNG, steps, 1, skip_at=skip_at)
        series = metrics_series.extract(records)
        self.assertEqual(series["skipped"].steps, sorted(skip_at))
        self.assertEqual(series["skipped"].steps, truth["skipped"])
        # The scale a skipped step ran with, halved at the next record:
        # explained by the logged skip, so no backoff marker besides.
        self.assertEqual(series["backoff"].steps, [])
        scale_at = dict(zip(series["loss_scale"].steps, series["loss_scale"].values))
        self.assertEqual(series["skipped"].values, [scale_at[s] for s in sorted(skip_at)])

    def test_skip_between_log_records_found_from_the_scale(self):
        log_every = RNG.randrange(3, 7)
        # Isolated skips off the log steps: each shows only as a fall at the
        # next record.
        starts = RNG.sample(range(1, 15), RNG.randrange(1, 6))
        skip_at = {s * 2 * log_every + RNG.randrange(1, log_every) for s in starts}
        steps = max(skip_at) + 3 * log_every
        records, truth = make_run(RNG, steps, log_every, skip_at=skip_at)
        series = metrics_series.extract(records)
        self.assertEqual(series["skipped"].steps, [])
        expected = sorted(((s // log_every) + 1) * log_every for s in skip_at)
        self.assertEqual(series["backoff"].steps, expected)

    def test_null_figures_left_out(self):
        records, truth = make_run(RNG, 60, 2)
        steps = [r for r in records if r["event"] == "step"]
        gone = RNG.choice(steps)
        gone["loss"] = None  # ddp_train writes a non-finite loss as null
        series = metrics_series.extract(records)
        self.assertNotIn(gone["step"], series["train_loss"].steps)
        self.assertEqual(len(series["train_loss"]), len(steps) - 1)
        self.assertIn(gone["step"], series["lr"].steps)

    def test_resumed_run_later_record_wins(self):
        first, _ = make_run(RNG, 40, 5)
        second, truth = make_run(RNG, 60, 5)  # the resumed run's records repeat steps 5..40
        series = metrics_series.extract(first + [r for r in second if r["event"] == "step"])
        self.assertEqual(series["train_loss"].steps, truth["train_loss"][0])
        self.assertEqual(series["train_loss"].values, truth["train_loss"][1])

    def test_torn_last_line_is_ignored_with_a_note(self):
        records, truth = make_run(RNG, 30, 3)
        torn = json.dumps({"event": "step", "step": 33, "loss": 1.0})[: RNG.randrange(5, 20)]
        series, notes = metrics_series.load_run(write_jsonl(self.path("torn.jsonl"), records, torn))
        self.assertEqual(series["train_loss"].steps, truth["train_loss"][0])
        self.assertEqual(len(notes), 1)
        self.assertIn("torn", notes[0])

    def test_garbled_line_is_an_error_naming_it(self):
        records, _ = make_run(RNG, 30, 3)
        line = RNG.randrange(1, len(records) - 1)
        lines = [json.dumps(r) for r in records]
        lines[line] = lines[line][:-3]
        path = self.path("garbled.jsonl")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        with self.assertRaises(metrics_series.MetricsError) as caught:
            metrics_series.load_run(path)
        self.assertIn(f"line {line + 1}", str(caught.exception))

    def test_one_unparseable_line_is_not_a_torn_file(self):
        path = self.path("binary.jsonl")
        with open(path, "wb") as f:
            f.write(bytes(RNG.randrange(256) for _ in range(RNG.randrange(8, 64))).replace(b"\n", b"") + b"\xff")
        with self.assertRaises(metrics_series.MetricsError) as caught:
            metrics_series.load_run(path)
        self.assertIn("line 1 is not JSON", str(caught.exception))

    def test_no_step_records_is_an_error(self):
        records, _ = make_run(RNG, 30, 3, eval_every=10)
        with self.assertRaises(metrics_series.MetricsError):
            metrics_series.extract([r for r in records if r["event"] != "step"])


class PlotMetrics(TempDirTest):
    def test_two_runs_give_the_pngs(self):
        from ddp_tools.plots import plot_metrics
        a, _ = make_run(RNG, 120, 4, eval_every=40, skip_at={7, 50})
        b, _ = make_run(RNG, 80, 2, eval_every=20)
        os.makedirs(self.path("r1"))
        os.makedirs(self.path("r2"))
        pa = write_jsonl(self.path("r1/metrics.jsonl"), a)
        pb = write_jsonl(self.path("r2/metrics.jsonl"), b)
        runs, _ = plot_metrics.load_runs([pa, pb])
        self.assertEqual([label for label, _ in runs], ["r1/metrics", "r2/metrics"])
        out = self.path("out")
        done = run_script("plot_metrics.py", pa, pb, "-o", out, "--label", "first", "--label", "second")
        self.assertEqual(done.returncode, 0, done.stderr)
        names = ["loss", "accuracy", "loss_scale", "lr", "throughput", "grad_norm", "overview"]
        self.assertEqual(sorted(os.listdir(out)), sorted(n + ".png" for n in names))
        for n in names:
            self.assert_png(os.path.join(out, n + ".png"))

    def test_a_series_no_run_has_is_skipped_with_a_note(self):
        records, _ = make_run(RNG, 50, 5, eval_every=25, accuracy=False)
        path = write_jsonl(self.path("regression.jsonl"), records)
        out = self.path("out")
        done = run_script("plot_metrics.py", path, "-o", out, "--prefix", "reg_")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("reg_accuracy.png not written", done.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "reg_accuracy.png")))
        self.assert_png(os.path.join(out, "reg_loss.png"))

    def test_panels_subset(self):
        records, _ = make_run(RNG, 50, 5, eval_every=25)
        path = write_jsonl(self.path("run.jsonl"), records)
        from ddp_tools.plots import plot_metrics
        chosen = RNG.sample(plot_metrics.PANEL_NAMES, RNG.randrange(1, 4))
        out = self.path("out")
        done = run_script("plot_metrics.py", path, "-o", out, "--panels", ",".join(chosen))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(sorted(os.listdir(out)), sorted(c + ".png" for c in chosen))
        self.assert_one_line_error(run_script("plot_metrics.py", path, "-o", out, "--panels", "loss,nope"),
                                   "--panels")

    def test_bad_input_is_one_line_and_exit_2(self):
        records, _ = make_run(RNG, 30, 3)
        good = write_jsonl(self.path("good.jsonl"), records)
        missing = self.path("nope.jsonl")
        self.assert_one_line_error(run_script("plot_metrics.py", good, missing, "-o", self.path("o")), missing)
        garbled = self.path("garbled.jsonl")
        with open(garbled, "w") as f:
            f.write(json.dumps(records[0]) + "\n{not json\n" + json.dumps(records[1]) + "\n")
        self.assert_one_line_error(run_script("plot_metrics.py", garbled, "-o", self.path("o")), garbled, "line 2")
        no_steps = write_jsonl(self.path("nosteps.jsonl"), [r for r in records if r["event"] != "step"])
        self.assert_one_line_error(run_script("plot_metrics.py", no_steps, "-o", self.path("o")), "no step records")
        self.assert_one_line_error(run_script("plot_metrics.py", good, "-o", self.path("o"), "--label", "x",
                                              "--label", "y"), "--label")
        self.assertFalse(os.path.exists(self.path("o")))


def write_csv(path, header, rows):
    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        for r in rows:
            f.write(",".join(str(r.get(c, "")) for c in header) + "\n")
    return path


SWEEP_HEADER = ["mode", "ranks", "batch_per_rank", "global_batch", "steps", "samples_per_s", "speedup",
                "efficiency", "allreduce_ms_per_step", "wall_s", "test_accuracy"]
PRED_HEADER = ["ranks", "mode", "algorithm", "zero_stage", "step_s", "samples_per_s", "efficiency"]


def sweep_rows(rng, ranks):
    base = rng.uniform(1000.0, 20000.0)
    rows = []
    for n in ranks:
        sps = base * n * rng.uniform(0.3, 1.0) if n > 1 else base
        rows.append({"mode": "strong", "ranks": n, "samples_per_s": sps, "efficiency": sps / base / n})
    return rows


def prediction_rows(rng, algorithms, stages, ranks):
    rows = []
    for a in algorithms:
        for z in stages:
            for n in ranks:
                eff = rng.uniform(0.1, 1.0)
                rows.append({"ranks": n, "mode": "strong", "algorithm": a, "zero_stage": z,
                             "step_s": rng.uniform(0.01, 1), "samples_per_s": 1000 * n * eff, "efficiency": eff})
            rows.append({"ranks": 4, "mode": "weak", "algorithm": a, "zero_stage": z, "samples_per_s": 1,
                         "efficiency": 1})
    return rows


class PlotSweep(TempDirTest):
    def test_pngs_with_the_prediction(self):
        from ddp_tools.plots import plot_sweep
        ranks = [1, 2, 4][: RNG.randrange(2, 4)]
        sweep = write_csv(self.path("sweep.csv"), SWEEP_HEADER, sweep_rows(RNG, ranks))
        pred = write_csv(self.path("pred.csv"), PRED_HEADER,
                         prediction_rows(RNG, ["ring", "tree", "auto"], [0], [2 ** k for k in range(10)]))
        paths = plot_sweep.plot_sweep(sweep, pred, self.path("out"))
        self.assertEqual([os.path.basename(p) for p in paths], ["sweep_samples_per_s.png", "sweep_efficiency.png"])
        for p in paths:
            self.assert_png(p)
        self.assertEqual(len(plot_sweep.plot_sweep(sweep, None, self.path("out2"))), 2)

    def test_prediction_lines_chosen(self):
        from ddp_tools.plots import plot_sweep
        ranks = [2 ** k for k in range(RNG.randrange(3, 12))]
        pred = write_csv(self.path("pred.csv"), PRED_HEADER, prediction_rows(RNG, ["ring", "auto"], [0, 3], ranks))
        rows = plot_sweep.read_rows(pred, "prediction")
        lines = plot_sweep.prediction_series(rows, {"strong"})
        self.assertEqual(sorted(lines), [("model, auto, ZeRO 0", "strong"), ("model, auto, ZeRO 3", "strong")])
        xs, sps, eff = lines[("model, auto, ZeRO 3", "strong")]
        self.assertEqual(xs, ranks)
        want = [r for r in rows if r["algorithm"] == "auto" and r["zero_stage"] == "3" and r["mode"] == "strong"]
        self.assertEqual(eff, [r["efficiency"] for r in want])
        without_auto = [r for r in rows if r["algorithm"] != "auto" and r["zero_stage"] == "0"]
        self.assertEqual(sorted(plot_sweep.prediction_series(without_auto, {"strong"})),
                         [("model, ring", "strong")])
        # launch/scaling_model.py --algorithm auto: one row per N, named by
        # the collectives it chose there, which change along N: one line.
        chosen = [dict(r, algorithm=RNG.choice(["ring", "tree", "hier-ring", "ring+tree"]))
                  for r in rows if r["algorithm"] == "auto" and r["zero_stage"] == "3"]
        lines = plot_sweep.prediction_series(chosen, {"strong"})
        self.assertEqual(len(lines), 1, lines)
        (xs, _, eff), = lines.values()
        self.assertEqual(xs, ranks)
        self.assertEqual(eff, [r["efficiency"] for r in want])

    def test_bad_input_is_one_line_and_exit_2(self):
        sweep = write_csv(self.path("sweep.csv"), SWEEP_HEADER, sweep_rows(RNG, [1, 2]))
        no_column = write_csv(self.path("bad.csv"), ["mode", "ranks", "speedup"], [{"mode": "strong", "ranks": 1}])
        self.assert_one_line_error(run_script("plot_sweep.py", no_column, "-o", self.path("o")),
                                   "bad.csv", "no column samples_per_s, efficiency")
        missing = self.path("nope.csv")
        self.assert_one_line_error(run_script("plot_sweep.py", sweep, "--prediction", missing, "-o",
                                              self.path("o")), missing)
        bad_ranks = write_csv(self.path("ranks.csv"), SWEEP_HEADER, [{"ranks": "two", "samples_per_s": 1}])
        self.assert_one_line_error(run_script("plot_sweep.py", bad_ranks, "-o", self.path("o")), "line 2", "ranks")


class TensorBoard(TempDirTest):
    @classmethod
    def setUpClass(cls):
        from ddp_tools.plots import metrics_to_tensorboard
        cls.available = metrics_to_tensorboard.ensure_tensorboard(quiet=True)
        if not cls.available:
            MISSING.append("the tensorboard package is missing and pip could not install it (no network?)")

    def setUp(self):
        if not self.available:
            self.skipTest("no tensorboard")
        super().setUp()

    def test_event_files_read_back_equal_the_input(self):
        from ddp_tools.plots import metrics_to_tensorboard as m2tb
        skip_at = set(RNG.sample(range(1, 81), 4))
        records, truth = make_run(RNG, 80, 1, eval_every=RNG.randrange(10, 30), skip_at=skip_at)
        path = write_jsonl(self.path("run.jsonl"), records)
        out = self.path("tb")
        done = run_script("metrics_to_tensorboard.py", path, out)
        self.assertEqual(done.returncode, 0, done.stderr)
        back = m2tb.read_events(out)
        self.assertEqual(sorted(back), sorted(list(m2tb.TAGS.values()) + [m2tb.SKIPPED_TAG]))
        for name, tag in m2tb.TAGS.items():
            steps, values = back[tag]
            self.assertEqual(steps, truth[name][0], tag)
            # TensorBoard keeps scalars as float32.
            self.assertEqual(values, [float(np.float32(v)) for v in truth[name][1]], tag)
        steps, flags = back[m2tb.SKIPPED_TAG]
        self.assertEqual([s for s, f in zip(steps, flags) if f == 1.0], sorted(skip_at))
        self.assertEqual(len(steps), 80)

    def test_bad_input_is_one_line_and_exit_2(self):
        missing = self.path("nope.jsonl")
        self.assert_one_line_error(run_script("metrics_to_tensorboard.py", missing, self.path("tb")), missing)


def main():
    print(f"test_plots: seed {SEED} (TEST_PLOTS_SEED={SEED} repeats it)")
    try:
        plot_common.pyplot()
    except plot_common.NoMatplotlib as e:
        print(f"SKIP: {e}")
        sys.exit(SKIP)
    if np is None:
        print(f"SKIP: numpy is not installed for {sys.executable} (apt-get install python3-numpy)")
        sys.exit(SKIP)
    result = unittest.main(exit=False, verbosity=2).result
    if not result.wasSuccessful():
        sys.exit(1)
    if MISSING:
        print("SKIP (the other tests passed): " + "; ".join(MISSING))
        sys.exit(SKIP)
    sys.exit(0)


if __name__ == "__main__":
    main()
