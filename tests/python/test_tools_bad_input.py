#!/usr/bin/python3
"""test_tools_bad_input.py: the launch/ Python tools given what a careless user
gives them (launch/careless/python_tools.sh has the same cases and more, as
a table), each a regression test of a fix:

- inputs that are a FIFO or a sparse multi-GB file are refused at once (they
  hung: open() of a FIFO blocks, and the file was read whole);
- an output that is an input (directly, through a symlink or a hard link), two
  outputs on one path, an output that is a directory or in a missing one, and
  an existing file that ddp_train and its tools did not write (no record of it
  in the output registry: test_output_registry.py has that rule's own cases)
  are refused before anything is written; a user's OUT.tmp is left alone (it
  was the fixed temporary name);
- foreign and torn files (a JSON array as a cluster, a PNG as a table, a trace
  event that is a number, a CSV row cut short, ranks 1e300) are one line;
- tune.py: a --study-dir that is a file, a study.db that is not SQLite, cut
  short or a directory, bad numbers and a launcher that is not a command are one
  line before any trial, and Ctrl-C mid-trial is one line (no Optuna traceback)
  and the same command resumes;
- scaling_sweep.py checks --prediction and its outputs before the first run;
  zero_table.py its lists and --out; torch_load_weights.py its input before it
  imports torch; a trial whose trainer cannot start is a failed trial, a job
  script that cannot be written a failed submission, and a failed zero_table
  run names ddp_train's error line rather than mpiexec's banner.

Every refusal: exit status 2 (3 for a missing dependency), one line on stderr
besides argparse's usage, no traceback, the inputs unchanged. Each test has
its own output registry (XDG_STATE_HOME in a fresh temporary directory), so
none reads or writes the user's ~/.local/state.

  PYTHONPATH=launch /usr/bin/python3 tests/python/test_tools_bad_input.py build/ddp_train

Exits 77 (ctest's SKIP_RETURN_CODE) when matplotlib or optuna is missing, after
running the tests that need neither, whose failures still fail it.
"""
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.normpath(os.path.join(HERE, "..", "..", "launch"))
FIXTURE = os.path.join(HERE, "fixtures", "trace_mlp_1rank.json")
SKIP = 77
TIMEOUT_S = 20  # a refusal takes well under a second; one that hangs fails here
HUGE_BYTES = 2 << 30  # sparse: over tool_files' 1 GiB cap for traces and metrics
TRAINER = None  # from argv[1]
MISSING = []  # why tests needing a dependency were skipped


def have(module):
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode == 0


HAVE_MATPLOTLIB = have("matplotlib")
HAVE_OPTUNA = have("optuna")


def run_tool(script, *args, timeout=TIMEOUT_S):
    """The tool's CompletedProcess; a hang is returncode None with 'hung' on stderr."""
    try:
        return subprocess.run([sys.executable, os.path.join(LAUNCH, script)] + list(args), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, None, "", f"hung for {timeout} s")


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class ToolTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="test_tools_bad_input_")
        self.dir = self.tmp.name
        # The tools run as subprocesses inherit it: a registry of this test's own.
        self.state = tempfile.TemporaryDirectory(prefix="test_tools_bad_input_state_")
        self.saved_state = os.environ.get("XDG_STATE_HOME")
        os.environ["XDG_STATE_HOME"] = self.state.name

    def tearDown(self):
        if self.saved_state is None:
            del os.environ["XDG_STATE_HOME"]
        else:
            os.environ["XDG_STATE_HOME"] = self.saved_state
        self.state.cleanup()
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, data):
        with open(self.path(name), "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        return self.path(name)

    def trace(self, name="run.rank0.json"):
        with open(FIXTURE) as f:
            return self.write(name, f.read())

    def huge(self, name="huge.json"):
        path = self.path(name)
        with open(path, "wb") as f:
            f.truncate(HUGE_BYTES)
        return path

    def fifo(self, name="fifo"):
        os.mkfifo(self.path(name))
        return self.path(name)

    def assert_refused(self, done, *words, status=2):
        """Exit status, one line besides argparse's usage block, naming every word."""
        self.assertEqual(done.returncode, status, done.stderr)
        self.assertNotIn("Traceback", done.stderr)
        lines = [l for l in done.stderr.splitlines() if l.strip() and not l.startswith(("usage: ", "  "))]
        self.assertEqual(len(lines), 1, done.stderr)
        for word in words:
            self.assertIn(word, lines[0])

    def assert_unchanged(self, paths, action):
        before = {p: digest(p) for p in paths}
        result = action()
        self.assertEqual({p: digest(p) for p in paths}, before, "an input changed")
        return result

    def assert_no_temporary(self):
        left = [n for n in os.listdir(self.dir) if n.endswith(".tmp") and n != "out.json.tmp"]
        self.assertEqual(left, [], "a temporary file was left behind")


class MergeTraces(ToolTest):
    def test_a_pipe_with_a_reader_is_written_in_place_and_one_without_is_refused(self):
        # `-o /dev/stdout | ...` worked before the outputs were written
        # through temporary files; a FIFO nobody reads is refused, not waited on.
        trace = self.trace()
        done = subprocess.run(f"'{sys.executable}' '{os.path.join(LAUNCH, 'merge_traces.py')}' '{trace}' "
                              f"-o /dev/stdout | head -c 14", shell=True, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout, '{"traceEvents"')
        self.assertNotIn("Traceback", done.stderr)
        self.assert_refused(run_tool("merge_traces.py", trace, "-o", self.fifo("nobody")), "no process reads")

    def test_fifo_and_huge_inputs_are_refused_without_reading_them(self):
        self.assert_refused(run_tool("merge_traces.py", self.fifo(), "-o", self.path("m.json")), "fifo",
                            "not a regular file")
        self.assert_refused(run_tool("merge_traces.py", self.huge(), "-o", self.path("m.json")), "huge.json",
                            "limit")
        self.assertFalse(os.path.exists(self.path("m.json")))

    def test_output_through_a_symlink_or_hard_link_to_an_input_is_refused(self):
        trace = self.trace()
        os.symlink(trace, self.path("soft.json"))
        os.link(trace, self.path("hard.json"))
        for out in ("soft.json", "hard.json"):
            done = self.assert_unchanged([trace], lambda: run_tool("merge_traces.py", trace, "-o", self.path(out)))
            self.assert_refused(done, out, "one of the inputs")
        self.assertTrue(os.path.islink(self.path("soft.json")))

    def test_output_in_a_missing_directory_or_a_directory_is_one_line(self):
        trace = self.trace()
        self.assert_refused(run_tool("merge_traces.py", trace, "-o", self.path("nodir/m.json")), "does not exist")
        os.mkdir(self.path("adir"))
        self.assert_refused(run_tool("merge_traces.py", trace, "-o", self.path("adir")), "is a directory")
        self.assertEqual(os.listdir(self.path("adir")), [])

    def test_a_users_file_named_like_the_temporary_is_kept(self):
        precious = self.write("out.json.tmp", "my notes\n")
        done = run_tool("merge_traces.py", self.trace(), "-o", self.path("out.json"))
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(precious) as f:
            self.assertEqual(f.read(), "my notes\n")
        self.assert_no_temporary()

    def test_an_existing_file_it_did_not_write_is_not_replaced(self):
        notes = self.write("notes.txt", "my notes\n")
        done = self.assert_unchanged([notes], lambda: run_tool("merge_traces.py", self.trace(), "-o", notes))
        self.assert_refused(done, "notes.txt", "not a file ddp_train wrote", "--overwrite")

    def test_an_event_that_is_not_an_object_is_one_line(self):
        with open(FIXTURE) as f:
            text = f.read()
        bad = self.write("bad.json", text.replace('"traceEvents": [', '"traceEvents": [7, ', 1))
        self.assert_refused(run_tool("merge_traces.py", bad, "-o", self.path("m.json")), "bad.json",
                            "traceEvents[0]")


class ScalingModel(ToolTest):
    def test_an_output_that_is_the_trace_is_refused(self):
        trace = self.trace()
        os.link(trace, self.path("hard.md"))
        for flag, out in (("--csv", trace), ("--csv", os.path.join(self.dir, ".", "run.rank0.json")),
                          ("--md", self.path("hard.md"))):
            done = self.assert_unchanged([trace], lambda: run_tool("scaling_model.py", "--trace", trace, flag, out))
            self.assert_refused(done, flag, "one of the inputs")

    def test_two_outputs_on_one_path_and_a_png_on_a_directory_are_refused(self):
        trace = self.trace()
        out = self.path("m.out")
        self.assert_refused(run_tool("scaling_model.py", "--trace", trace, "--csv", out, "--md", out), "--md",
                            "also --csv")
        self.assertFalse(os.path.exists(out))
        os.mkdir(self.path("adir"))
        self.assert_refused(run_tool("scaling_model.py", "--trace", trace, "--png", self.path("adir")), "--png",
                            "is a directory")
        self.assertFalse(os.path.exists(self.path("adir.png")))

    def test_fifo_and_huge_inputs_are_refused(self):
        self.assert_refused(run_tool("scaling_model.py", "--trace", self.fifo()), "--trace", "not a regular file")
        self.assert_refused(run_tool("scaling_model.py", "--trace", self.trace(), "--cluster", self.huge()),
                            "--cluster", "limit")

    def test_foreign_cluster_and_table_files_are_one_line(self):
        trace = self.trace()
        png = self.write("x.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00")
        array = self.write("array.json", "[1, 2]\n")
        nan = self.write("nan.json", '{"name": "x", "gpus_per_node": 8, "intra": {"bandwidth_GBps": NaN, '
                                     '"latency_us": 1}, "inter": {"bandwidth_GBps": 50, "latency_us": 8}}\n')
        for flag, path in (("--cluster", array), ("--cluster", png), ("--cluster", nan),
                           ("--allreduce-table", png)):
            self.assert_refused(run_tool("scaling_model.py", "--trace", trace, flag, path), flag,
                                os.path.basename(path))


class ValidateScalingModel(ToolTest):
    def test_out_equal_to_an_input_is_refused(self):
        trace = self.trace()
        done = self.assert_unchanged([trace], lambda: run_tool("validate_scaling_model.py", "--from-traces", trace,
                                                               trace, "--out", trace))
        self.assert_refused(done, "--out", "one of the inputs")

    def test_out_in_a_missing_directory_and_a_missing_trainer_are_one_line(self):
        trace = self.trace()
        self.assert_refused(run_tool("validate_scaling_model.py", "--from-traces", trace, trace, "--out",
                                     self.path("nodir/v.md")), "--out", "does not exist")
        self.assert_refused(run_tool("validate_scaling_model.py", "--trainer", self.path("nope")), "--trainer",
                            "not an executable")


METRICS = "".join('{"event": "step", "step": %d, "loss": %g, "loss_scale": 65536, "lr": 0.05}\n' % (s, 2.0 / s)
                  for s in range(1, 6))


@unittest.skipUnless(HAVE_MATPLOTLIB, "no matplotlib")
class PlotMetrics(ToolTest):
    def test_fifo_and_huge_metrics_are_refused(self):
        self.assert_refused(run_tool("plot_metrics.py", self.fifo(), "-o", self.path("o")), "not a regular file")
        self.assert_refused(run_tool("plot_metrics.py", self.huge("m.jsonl"), "-o", self.path("o")), "limit")
        self.assertFalse(os.path.exists(self.path("o")))

    def test_a_prefix_that_is_a_path_is_refused(self):
        metrics = self.write("m.jsonl", METRICS)
        os.mkdir(self.path("o"))
        for prefix in ("../", "nodir/"):
            self.assert_refused(run_tool("plot_metrics.py", metrics, "-o", self.path("o"), "--prefix", prefix),
                                "--prefix")
        self.assertEqual(sorted(os.listdir(self.dir)), ["m.jsonl", "o"])
        self.assertEqual(os.listdir(self.path("o")), [])

    def test_a_png_name_that_is_the_input_or_someone_elses_file_is_refused(self):
        os.mkdir(self.path("o"))
        metrics = self.write("o/loss.png", METRICS)
        done = self.assert_unchanged([metrics], lambda: run_tool("plot_metrics.py", metrics, "-o", self.path("o")))
        self.assert_refused(done, "loss.png", "one of the inputs")
        os.rename(metrics, self.path("m.jsonl"))
        notes = self.write("o/lr.png", "my notes\n")
        done = self.assert_unchanged([notes], lambda: run_tool("plot_metrics.py", self.path("m.jsonl"), "-o",
                                                               self.path("o")))
        self.assert_refused(done, "lr.png", "not a file ddp_train wrote")
        self.assertEqual(os.listdir(self.path("o")), ["lr.png"])


SWEEP = "mode,ranks,samples_per_s,efficiency\nstrong,1,100,1\nstrong,2,180,0.9\n"


@unittest.skipUnless(HAVE_MATPLOTLIB, "no matplotlib")
class PlotSweep(ToolTest):
    def test_a_torn_row_absurd_ranks_and_a_fifo_are_one_line(self):
        torn = self.write("torn.csv", SWEEP + "strong,4")
        self.assert_refused(run_tool("plot_sweep.py", torn, "-o", self.path("o")), "line 4", "fewer cells")
        absurd = self.write("absurd.csv", SWEEP.replace("strong,2,", "strong,1e300,"))
        self.assert_refused(run_tool("plot_sweep.py", absurd, "-o", self.path("o")), "line 3", "ranks")
        self.assert_refused(run_tool("plot_sweep.py", self.fifo(), "-o", self.path("o")), "not a regular file")
        self.assertFalse(os.path.exists(self.path("o")))

    def test_a_png_name_that_is_an_input_is_refused(self):
        os.mkdir(self.path("o"))
        sweep = self.write("o/sweep_efficiency.png", SWEEP)
        done = self.assert_unchanged([sweep], lambda: run_tool("plot_sweep.py", sweep, "-o", self.path("o")))
        self.assert_refused(done, "sweep_efficiency.png", "one of the inputs")


class MetricsToTensorBoard(ToolTest):
    def test_fifo_and_huge_metrics_are_refused(self):
        self.assert_refused(run_tool("metrics_to_tensorboard.py", self.fifo(), self.path("tb")), "not a regular file")
        self.assert_refused(run_tool("metrics_to_tensorboard.py", self.huge(), self.path("tb")), "limit")
        self.assertFalse(os.path.exists(self.path("tb")))


TRIAL_ARGS = ["--", "--data", "synthetic", "--steps", "3", "--device", "cpu", "--threads", "1"]


@unittest.skipUnless(HAVE_OPTUNA, "no optuna")
class Tune(ToolTest):
    def tune(self, study_dir, *args, trials="2"):
        return run_tool("tune.py", "--trainer", TRAINER, "--study-dir", study_dir, "--trials", trials,
                        "--objective", "test_loss", "--param", "lr=log:1e-3:1e-1", *args, *TRIAL_ARGS, timeout=60)

    def test_a_study_dir_that_is_a_file_and_a_bad_study_db_are_one_line(self):
        notes = self.write("notes.txt", "my notes\n")
        self.assert_refused(self.tune(notes), "--study-dir", "not a directory")
        os.makedirs(self.path("foreign"))
        foreign = self.write("foreign/study.db", "not a database\n")
        os.makedirs(self.path("torn"))
        torn = self.write("torn/study.db", b"SQLite format 3\x00" + b"\x10\x00" + b"\x00" * 200)
        os.makedirs(self.path("dir/study.db"))
        for study_dir, words in (("foreign", "not a SQLite"), ("torn", "not a readable study"),
                                 ("dir", "is a directory")):
            done = self.assert_unchanged([foreign, torn], lambda: self.tune(self.path(study_dir)))
            self.assert_refused(done, "--study-dir", words)
        self.assertEqual(os.listdir(self.path("foreign")), ["study.db"])

    def test_a_users_report_file_is_refused_before_any_trial(self):
        os.makedirs(self.path("st"))
        notes = self.write("st/trials.md", "my notes\n")
        done = self.assert_unchanged([notes], lambda: self.tune(self.path("st")))
        self.assert_refused(done, "trials.md", "not a file ddp_train wrote", "--overwrite")
        self.assertEqual(os.listdir(self.path("st")), ["trials.md"], "a study began before the refusal")

    def test_a_users_file_in_a_trial_directory_stops_the_search_in_one_line(self):
        # A trial-0000/ left where a study.db was deleted, holding the user's file.
        os.makedirs(self.path("st/trial-0000"))
        notes = self.write("st/trial-0000/log.txt", "my notes\n")
        done = self.assert_unchanged([notes], lambda: self.tune(self.path("st"), trials="1"))
        self.assert_refused(done, "log.txt", "not a file ddp_train wrote", "--overwrite")
        # That trial does not count; the same command again runs the next.
        done = self.tune(self.path("st"), trials="1")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.count("| complete |"), 1, done.stdout)

    def test_bad_numbers_and_a_launcher_that_is_no_command_are_refused(self):
        for args, flag in ((["--timeout", "nan"], "--timeout"), (["--seed", "-1"], "--seed"),
                           (["--startup-trials", "-3"], "--startup-trials"),
                           (["--launcher", "no-such-launcher -n 2"], "no-such-launcher"),
                           (["--launcher", "'unbalanced"], "--launcher")):
            with self.subTest(args=args):
                study_dir = self.path("s")
                self.assert_refused(self.tune(study_dir, *args), flag)
                self.assertFalse(os.path.exists(study_dir), "a study was created before the refusal")

    def test_ctrl_c_mid_trial_is_one_line_and_the_same_command_resumes(self):
        flag = self.path("held-once")
        # A launcher that holds the first trial (then runs ddp_train): Ctrl-C comes mid-trial.
        launcher = f"sh -c 'if [ ! -e {flag} ]; then touch {flag}; sleep 30; fi; exec \"$@\"' hold"
        cmd = [sys.executable, os.path.join(LAUNCH, "tune.py"), "--trainer", TRAINER, "--study-dir",
               self.path("study"), "--trials", "2", "--objective", "test_loss", "--param", "lr=log:1e-3:1e-1",
               "--launcher", launcher] + TRIAL_ARGS
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 130, err)
        self.assertEqual(err.strip().splitlines(), ["tune: interrupted; re-run the same command to resume"])
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        # The interrupted trial does not count: two more complete (the table's rows).
        self.assertEqual(done.stdout.count("| complete |"), 2, done.stdout)
        self.assertIn("| fail (interrupted) |", done.stdout)


    def test_a_trainer_that_cannot_start_is_a_failed_trial(self):
        import argparse
        import optuna
        from ddp_tools.tune import tune_space
        from ddp_tools.tune import tune_trial
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        # The trainer checked at the start, gone (or being rebuilt) when a trial starts.
        cfg = argparse.Namespace(params=[tune_space.parse_param("lr=log:1e-3:1e-1")], launcher=[],
                                 trainer=[self.path("gone/ddp_train")], trial_args=[], metric_key="test_loss",
                                 direction="minimize", report_mode="step", study_dir=Path(self.path("study")),
                                 overwrite=False)
        study = optuna.create_study()
        study.optimize(lambda t: tune_trial.run_trial(t, cfg), n_trials=1, catch=(tune_trial.TrialFailed,))
        trial = study.trials[0]
        self.assertEqual(trial.state, optuna.trial.TrialState.FAIL)
        self.assertIn("cannot start", trial.user_attrs["fail_reason"])


class ScalingSweep(ToolTest):
    def sweep(self, *args):
        return run_tool("scaling_sweep.py", "--ranks", "1", "--steps", "3", "--data", "synthetic", "--global-batch",
                        "8", "--trainer", TRAINER, "--no-mpirun-for-1", *args, "--", "--threads", "1", timeout=60)

    def test_an_out_dir_that_is_a_file_is_one_line(self):
        notes = self.write("notes.txt", "my notes\n")
        done = self.assert_unchanged([notes], lambda: self.sweep("--out-dir", notes))
        self.assert_refused(done, "--out-dir", "not a directory")

    def test_the_prediction_is_checked_before_any_run(self):
        png = self.write("x.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00")
        self.assert_refused(self.sweep("--out-dir", self.path("sw"), "--prediction", png), "--prediction", "x.png")
        self.assertFalse(os.path.exists(self.path("sw")), "the sweep ran before the refusal")

    def test_a_prediction_in_the_sweeps_place_is_refused(self):
        os.mkdir(self.path("sw"))
        pred = self.write("sw/sweep.csv", "ranks,mode,algorithm,zero_stage,samples_per_s,efficiency\n"
                                          "1,strong,ring,0,100,1\n")
        done = self.assert_unchanged([pred], lambda: self.sweep("--out-dir", self.path("sw"), "--prediction", pred))
        self.assert_refused(done, "sweep.csv", "one of the inputs")
        self.assertEqual(os.listdir(self.path("sw")), ["sweep.csv"])

    def test_a_users_sweep_md_is_refused_before_any_run_and_overwrite_replaces_it(self):
        os.mkdir(self.path("sw"))
        notes = self.write("sw/sweep.md", "# my notes\n")
        done = self.assert_unchanged([notes], lambda: self.sweep("--out-dir", self.path("sw")))
        self.assert_refused(done, "sweep.md", "not a file ddp_train wrote", "--overwrite")
        self.assertEqual(os.listdir(self.path("sw")), ["sweep.md"], "the sweep ran before the refusal")
        done = self.sweep("--out-dir", self.path("sw"), "--overwrite")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("sweep.md (--overwrite)", done.stderr)
        # Every file there is the sweep's now: the same command replaces them all, saying so.
        done = self.sweep("--out-dir", self.path("sw"))
        self.assertEqual(done.returncode, 0, done.stderr)
        for name in ("sweep.md", "sweep.csv", "metrics-strong-n1.jsonl", "log-strong-n1.out"):
            self.assertIn(f"{name} (written by scaling_sweep.py --out-dir at", done.stderr)

    def test_a_slurm_job_script_path_that_is_a_directory_is_one_line(self):
        os.makedirs(self.path("sw/job-strong-n1.sbatch"))
        done = run_tool("scaling_sweep.py", "--ranks", "1", "--steps", "3", "--data", "synthetic", "--global-batch",
                        "8", "--trainer", TRAINER, "--slurm", "--sbatch", "/bin/true", "--out-dir", self.path("sw"))
        self.assert_refused(done, "job-strong-n1.sbatch", "is a directory")


    def test_a_job_script_that_cannot_be_written_is_a_failed_submission(self):
        from ddp_tools.sweeps import sweep_slurm
        os.mkdir(self.path("job.sbatch"))
        with self.assertRaises(sweep_slurm.SubmitFailed) as caught:
            sweep_slurm.submit(["/bin/true"], self.path("job.sbatch"), "#!/bin/sh\n", dict(os.environ),
                               self.path("log"), 10)
        self.assertIn("job.sbatch", str(caught.exception))


class ZeroTable(ToolTest):
    def test_bad_lists_and_out_are_refused_before_any_run(self):
        base = ["--binary", TRAINER, "--models", "mlp", "--ranks", "1", "--stages", "0", "--steps", "1",
                "--warmup", "0"]
        for args, flag in ((["--ranks", "a"], "--ranks"), (["--ranks", "0"], "--ranks"),
                           (["--models", "nope"], "--models"), (["--stages", "7"], "--stages"),
                           (["--out", self.path("nodir/z.md")], "--out"),
                           (["--out", self.write("notes.md", "# my notes\n")], "not a file ddp_train wrote")):
            with self.subTest(args=args):
                self.assert_refused(run_tool("zero_table.py", *base, *args), flag)


    def test_a_failed_run_names_the_trainers_error_not_mpiexecs_banner(self):
        fake = self.write("fake_trainer", "#!/bin/sh\necho 'ddp_train: error (rank 0 on h): boom' >&2\nexit 1\n")
        os.chmod(fake, 0o755)
        done = run_tool("zero_table.py", "--binary", fake, "--models", "mlp", "--ranks", "1", "--stages", "0",
                        "--steps", "1", "--warmup", "0", timeout=60)
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn("ddp_train: error (rank 0 on h): boom", done.stderr)


class TorchLoadWeights(ToolTest):
    def test_bad_input_is_one_line_before_torch_is_imported(self):
        weights = self.write("w.safetensors", b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
        self.assert_refused(run_tool("torch_load_weights.py", "--weights", weights, "--layers", "4,x"), "--layers")
        self.assert_refused(run_tool("torch_load_weights.py", "--weights", weights, "--layers", "4,3",
                                     "--no-predict", "--metrics", self.trace()), "--metrics", "not JSON")
        if not have("torch"):
            self.assert_refused(run_tool("torch_load_weights.py", "--weights", weights, "--layers", "4,3",
                                         "--no-predict", "--test-x", weights, "--test-y", weights), "torch",
                                status=3)


def main():
    global TRAINER
    if len(sys.argv) < 2:
        print("usage: test_tools_bad_input.py PATH/TO/ddp_train", file=sys.stderr)
        return 2
    TRAINER = os.path.abspath(sys.argv.pop(1))
    if not HAVE_MATPLOTLIB:
        MISSING.append(f"matplotlib is not installed for {sys.executable}")
    if not HAVE_OPTUNA:
        MISSING.append(f"optuna is not installed for {sys.executable}")
    result = unittest.main(exit=False, verbosity=2).result
    if not result.wasSuccessful():
        return 1
    if MISSING:
        print("SKIP (the other tests passed): " + "; ".join(MISSING))
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
