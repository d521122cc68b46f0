#!/usr/bin/python3
"""test_tune.py: launch/tune.py's Optuna search driving the real ddp_train on tiny synthetic data.

  PYTHONPATH=launch /usr/bin/python3 tests/python/test_tune.py build/ddp_train

- a 4-trial search (the default recipe, a better rate, a diverging rate, one TPE
  trial): 4 trials in study.db read back with optuna.load_study, the diverging one
  pruned at its first evaluation, best.ini accepted and run by `ddp_train --config`,
  the table, plots and trial directories written; a second invocation with a larger
  --trials continues the same study, and one with the same --trials runs nothing;
- a search stopped (SIGTERM) during a trial exits 130; the same command again runs
  that trial again (the interrupted one is failed and not counted) and the rest;
- a pruned trial that would run for minutes is stopped by SIGTERM (its metrics end
  with ddp_train's "stopped" record) within seconds; a trial whose last value is
  worse than the median completes (its result is not an intermediate value);
  --prune-warmup 8 moves the diverging trial's prune from step 4 to step 8;
- a trial that fails (ddp_train exits 1) is a FAIL trial and the search goes on;
- the epoch-mode follower reports each epoch's last evaluation once, across torn lines;
- bad input (unknown flag, malformed ranges, a flag also after --, an unknown or
  impossible objective) is one line on stderr, exit 2, and no study.

Exits 77 (ctest's SKIP_RETURN_CODE) when optuna is missing and pip cannot install it.
The rates are fresh random draws within ranges that behave the same (seed printed;
TEST_TUNE_SEED=S repeats a run).
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
import unittest

# What the tools write is recorded (launch/ddp_tools/common/output_registry.py): in a
# registry of this run's own, not the user's ~/.local/state (removed at exit).
_STATE = tempfile.TemporaryDirectory(prefix="test_tune_state_")
os.environ["XDG_STATE_HOME"] = _STATE.name

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.normpath(os.path.join(HERE, "..", "..", "launch"))
TUNE = os.path.join(LAUNCH, "tune.py")
SKIP = 77
SEED = int(os.environ.get("TEST_TUNE_SEED") or int.from_bytes(os.urandom(4), "little"))
RNG = random.Random(SEED)
TRAINER = None   # from argv[1]

# Every trial: a few steps of the synthetic regression (mse: test_loss, no accuracy),
# an evaluation every 4 steps for intermediate reports; --max-bad-steps 0 so that a
# diverging trial keeps running (skipping steps) until tune.py stops it.
TRIAL_ARGS = ["--data", "synthetic", "--synthetic-samples", "512", "--eval-every", "4",
              "--threads", "1", "--log-every", "5", "--max-bad-steps", "0"]


def ensure_optuna():
    try:
        import optuna  # noqa: F401
        return True
    except ImportError:
        pass
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--break-system-packages", "optuna"], capture_output=True)
    try:
        import optuna  # noqa: F401
        return True
    except ImportError:
        return False


def run_tune(*args, timeout=120):
    return subprocess.run([sys.executable, TUNE, "--trainer", TRAINER] + list(args),
                          capture_output=True, text=True, timeout=timeout)


def load(study_dir, name="ddp_train"):
    import optuna
    return optuna.load_study(study_name=name, storage=f"sqlite:///{study_dir}/study.db")


def read(path):
    with open(path) as f:
        return f.read()


def is_png(path):
    with open(path, "rb") as f:
        head = f.read(24)
    width, height = struct.unpack(">II", head[16:24])
    return head[:8] == b"\x89PNG\r\n\x1a\n" and 300 <= width <= 1200 and 200 <= height <= 800


class TuneTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="test_tune_")
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def assert_ok(self, done):
        self.assertEqual(done.returncode, 0, f"tune.py failed:\n{done.stdout}\n{done.stderr}")


class SearchPruneResume(TuneTest):
    def test_search_prune_resume(self):
        from optuna.trial import TrialState
        study_dir = os.path.join(self.dir, "study")
        good_lr = RNG.uniform(0.3, 0.6)      # beats the default 0.05 in 20 steps
        bad_lr = RNG.uniform(80, 150)        # mse of hundreds at step 4, then Inf
        common = ["--study-dir", study_dir, "--objective", "test_loss", "--seed", str(RNG.randrange(1000)),
                  "--param", "lr=log:1e-3:200", "--param", "weight-decay=log:1e-5:1e-1",
                  "--enqueue", "lr=0.05,weight-decay=1e-4", "--enqueue", f"lr={good_lr},weight-decay=1e-4",
                  "--enqueue", f"lr={bad_lr},weight-decay=1e-4"]
        args = TRIAL_ARGS + ["--steps", "20"]
        done = run_tune("--trials", "4", *common, "--", *args)
        self.assert_ok(done)
        study = load(study_dir)
        trials = study.trials
        self.assertEqual(len(trials), 4)
        self.assertEqual([t.params["lr"] for t in trials[:3]], [0.05, good_lr, bad_lr])
        self.assertEqual([t.state for t in trials[:2]], [TrialState.COMPLETE] * 2)
        self.assertEqual(trials[2].state, TrialState.PRUNED)
        self.assertEqual(trials[2].user_attrs["pruned_at"], 4, "pruned at its first evaluation")
        self.assertEqual(study.direction.name, "MINIMIZE")
        self.assertLess(trials[1].value, trials[0].value)
        for t in trials:
            trial_dir = os.path.join(study_dir, f"trial-{t.number:04d}")
            for name in ("command.txt", "log.txt", "metrics.jsonl"):
                self.assertTrue(os.path.isfile(os.path.join(trial_dir, name)), (t.number, name))
            self.assertIn(f"--lr {t.params['lr']!r}", read(os.path.join(trial_dir, "command.txt")))
        table = read(os.path.join(study_dir, "trials.md"))
        self.assertEqual(len(table.splitlines()), 2 + 4)
        self.assertIn("pruned at 4", table.splitlines()[2 + 2])
        self.assertIn(table, done.stdout)
        self.assert_plots(study_dir, study)

        # best.ini: the best trial's values, accepted and run by ddp_train --config.
        best = study.best_trial
        ini = os.path.join(study_dir, "best.ini")
        entries = dict(line.split(" = ") for line in read(ini).splitlines() if not line.startswith("#"))
        self.assertEqual({k: float(v) for k, v in entries.items()}, best.params)
        metrics = os.path.join(self.dir, "best.jsonl")
        run = subprocess.run([TRAINER, "--config", ini, "--metrics", metrics] + args,
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        summary = [json.loads(line) for line in read(metrics).splitlines() if '"summary"' in line][-1]
        self.assertAlmostEqual(summary["test_loss"], best.value, delta=1e-6 + 1e-3 * best.value)

        # --trials is the study's total: 6 runs two more in the same study (the
        # enqueued trials are not run again); the same command again runs none.
        for total in (6, 6):
            done = run_tune("--trials", str(total), *common, "--", *args)
            self.assert_ok(done)
            again = load(study_dir)
            import optuna
            names = optuna.get_all_study_names(storage=f"sqlite:///{study_dir}/study.db")
            self.assertEqual(names, ["ddp_train"], "one study, continued")
            self.assertEqual(len(again.trials), 6)
        self.assertIn("nothing to run", done.stdout)
        self.assertEqual([t.params for t in again.trials[:4]], [t.params for t in trials])
        self.assertNotIn(0.05, [t.params["lr"] for t in again.trials[4:]])
        self.assertEqual(len(read(os.path.join(study_dir, "trials.md")).splitlines()), 2 + 6)
        self.assert_plots(study_dir, again)

    def assert_plots(self, study_dir, study):
        """The history, and importances from 4 complete trials of the 2 parameters, else a slice plot."""
        from optuna.trial import TrialState
        complete = len(study.get_trials(states=(TrialState.COMPLETE,)))
        second = "importances.png" if complete >= 4 else "slice.png"
        for png in ("history.png", second):
            self.assertTrue(is_png(os.path.join(study_dir, png)), png)


class InterruptedSearchResumes(TuneTest):
    def test_stopped_search_reruns_the_interrupted_trial(self):
        from optuna.trial import TrialState
        study_dir = os.path.join(self.dir, "study")
        flag = os.path.join(self.dir, "launched-once")
        # A --launcher that holds the first trial for a minute (then runs ddp_train):
        # tune.py gets SIGTERM while that trial runs.
        launcher = f"sh -c 'if [ ! -e {flag} ]; then touch {flag}; sleep 60; fi; exec \"$@\"' launcher"
        args = ["--trainer", TRAINER, "--study-dir", study_dir, "--trials", "2", "--objective", "test_loss",
                "--param", "lr=log:1e-3:1", "--enqueue", "lr=0.05", "--launcher", launcher,
                "--", *TRIAL_ARGS, "--steps", "8"]
        proc = subprocess.Popen([sys.executable, TUNE] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        deadline = time.monotonic() + 30
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.terminate()
        out, err = proc.communicate(timeout=90)
        self.assertEqual(proc.returncode, 130, err)
        self.assertIn("re-run the same command to resume", err)
        first = load(study_dir).trials
        self.assertEqual(len(first), 1)
        self.assertEqual((first[0].state, first[0].user_attrs.get("interrupted")), (TrialState.FAIL, True))
        from ddp_tools.tune import tune_trial
        self.assertFalse(tune_trial.group_alive(first[0].user_attrs["pgid"]), "the held trial's group lives on")
        done = subprocess.run([sys.executable, TUNE] + args, capture_output=True, text=True, timeout=120)
        self.assert_ok(done)
        trials = load(study_dir).trials
        # The interrupted trial does not count: two more run, the enqueued recipe first.
        self.assertEqual([t.state for t in trials], [TrialState.FAIL] + [TrialState.COMPLETE] * 2)
        self.assertEqual(trials[1].params, {"lr": 0.05})


class Pruning(TuneTest):
    def test_sigterm_stops_a_long_pruned_trial(self):
        from optuna.trial import TrialState
        study_dir = os.path.join(self.dir, "study")
        start = time.monotonic()
        # The third trial would run 10^6 steps (minutes); pruned at step 4, it must end at once.
        done = run_tune("--study-dir", study_dir, "--trials", "3", "--objective", "test_loss",
                        "--param", "lr=log:1e-3:200", "--param", "steps=choice:20,1000000",
                        "--enqueue", "lr=0.05,steps=20", "--enqueue", "lr=0.5,steps=20",
                        "--enqueue", f"lr={RNG.uniform(80, 150)},steps=1000000", "--", *TRIAL_ARGS)
        self.assert_ok(done)
        self.assertLess(time.monotonic() - start, 60)
        pruned = load(study_dir).trials[2]
        self.assertEqual(pruned.state, TrialState.PRUNED)
        self.assertEqual(pruned.user_attrs["exit_status"], 143, "ddp_train's status after SIGTERM")
        last = json.loads(read(os.path.join(study_dir, "trial-0002", "metrics.jsonl")).splitlines()[-1])
        self.assertEqual((last["event"], last["signal"]), ("stopped", "SIGTERM"))
        self.assertLess(last["step"], 1000000)


    def test_prune_warmup_delays_the_prune(self):
        from optuna.trial import TrialState
        study_dir = os.path.join(self.dir, "study")
        # The same diverging third trial, but no pruning before step 8: pruned at 8, not 4.
        done = run_tune("--study-dir", study_dir, "--trials", "3", "--objective", "test_loss",
                        "--prune-warmup", "8", "--param", "lr=log:1e-3:200",
                        "--enqueue", "lr=0.05", "--enqueue", "lr=0.5", "--enqueue", f"lr={RNG.uniform(80, 150)}",
                        "--", *TRIAL_ARGS, "--steps", "20")
        self.assert_ok(done)
        pruned = load(study_dir).trials[2]
        self.assertEqual((pruned.state, pruned.user_attrs["pruned_at"]), (TrialState.PRUNED, 8))
        self.assertEqual(sorted(pruned.intermediate_values), [4, 8])

    def test_a_finished_trials_last_value_is_not_pruned(self):
        from optuna.trial import TrialState
        study_dir = os.path.join(self.dir, "study")
        # The third trial's only evaluation, at its last step 4, is far worse than the
        # other two's at step 4: its result, so it completes rather than being pruned.
        done = run_tune("--study-dir", study_dir, "--trials", "3", "--objective", "test_loss",
                        "--param", "lr=log:1e-3:200", "--param", "steps=choice:4,20",
                        "--enqueue", f"lr={RNG.uniform(0.4, 0.6)},steps=20", "--enqueue", "lr=0.5,steps=20",
                        "--enqueue", "lr=0.01,steps=4", "--", *TRIAL_ARGS)
        self.assert_ok(done)
        trials = load(study_dir).trials
        self.assertGreater(trials[2].intermediate_values[4], max(t.intermediate_values[4] for t in trials[:2]))
        self.assertEqual([t.state for t in trials], [TrialState.COMPLETE] * 3)
        self.assertEqual(trials[2].value, trials[2].intermediate_values[4])


class FailedTrialIsRecorded(TuneTest):
    def test_failed_trial_does_not_end_the_search(self):
        from optuna.trial import TrialState
        study_dir = os.path.join(self.dir, "study")
        # --momentum 1 is refused by ddp_train (exit 1): a FAIL trial; the next one runs.
        done = run_tune("--study-dir", study_dir, "--trials", "2", "--objective", "val_loss",
                        "--param", "momentum=float:0:1", "--enqueue", "momentum=1", "--enqueue", "momentum=0.5",
                        "--", *TRIAL_ARGS, "--steps", "8")
        self.assert_ok(done)
        trials = load(study_dir).trials
        self.assertEqual([t.state for t in trials], [TrialState.FAIL, TrialState.COMPLETE])
        self.assertEqual(trials[0].user_attrs["fail_reason"], "exit status 1")
        self.assertIn("fail (exit status 1)", read(os.path.join(study_dir, "trials.md")))


class EpochFollower(unittest.TestCase):
    def test_epoch_mode_reports_each_epochs_last_eval(self):
        from ddp_tools.tune import tune_trial
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.jsonl")
            evals = [RNG.uniform(0.5, 0.9) for _ in range(4)]
            records = [{"event": "eval", "step": 3, "epoch": 1, "test_accuracy": evals[0]},
                       {"event": "eval", "step": 6, "epoch": 1, "test_accuracy": evals[1]},
                       {"event": "step", "step": 7, "epoch": 2, "samples_per_s": 9.0},
                       {"event": "eval", "step": 9, "epoch": 2, "test_accuracy": None},
                       {"event": "eval", "step": 12, "epoch": 3, "test_accuracy": evals[3]},
                       {"event": "summary", "test_accuracy": evals[3]}]
            text = "".join(json.dumps(r) + "\n" for r in records)
            follower = tune_trial.MetricsFollower(path, "test_accuracy", "maximize", "epoch")
            got = []
            cut = text.index('"step": 9') - 5        # a torn line: the rest arrives later
            for part, finished in ((text[:cut], False), (text[cut:], True)):
                with open(path, "a") as f:
                    f.write(part)
                got += follower.poll(finished)
            # The last (the result, known once the run ended) is not one to prune on.
            self.assertEqual(got, [(1, evals[1], False), (2, float("-inf"), False), (3, evals[3], True)])
            self.assertEqual(follower.value(follower.summary), evals[3])


class BadInput(TuneTest):
    CASES = [  # (tune.py arguments, what the one line must name)
        (["--param", "nosuch-flag=log:1e-3:1"], "nosuch-flag"),
        (["--param", "lr=log:0:1"], "LOW > 0"),
        (["--param", "lr=float:0.5:0.1"], "LOW must be below HIGH"),
        (["--param", "batch-size=int:64:64"], "LOW must be below HIGH"),
        (["--param", "batch-size=choice:"], "empty choice"),
        (["--param", "batch-size=choice:64,,128"], "empty choice"),
        (["--param", "lr=log:1e-3"], "LOW:HIGH"),
        (["--param", "nesterov=choice:0,1"], "switch"),
        (["--param", "lr=log:1e-3:1", "--", "--lr", "0.1"], "also given after --"),
        (["--param", "lr=log:1e-3:1", "--", "--lr=0.1"], "also given after --"),
        (["--param", "lr=log:1e-3:1", "--enqueue", "lr=5"], "outside"),
        (["--param", "lr=log:1e-3:1", "--objective", "accuracy"], "--objective accuracy"),
        (["--param", "lr=log:1e-3:1", "--prune-warmup", "-1"], "--prune-warmup"),
        (["--param", "lr=log:1e-3:1", "--objective", "test_accuracy", "--", "--data", "synthetic"], "mse"),
    ]

    def test_bad_input_is_one_line_and_exit_2(self):
        for case, (args, named) in enumerate(self.CASES):
            with self.subTest(args=args):
                study_dir = os.path.join(self.dir, f"s{case}")
                full = ["--study-dir", study_dir, "--trials", "2"]
                if "--objective" not in args:
                    full += ["--objective", "test_loss"]
                done = run_tune(*full, *args)
                self.assertEqual(done.returncode, 2, done.stderr)
                lines = done.stderr.splitlines()
                self.assertEqual(len(lines), 1, done.stderr)
                self.assertIn(named, lines[0])
                self.assertNotIn("Traceback", done.stderr)
                self.assertFalse(os.path.exists(study_dir), "a study was created before the refusal")


def main():
    global TRAINER
    if len(sys.argv) < 2:
        print("usage: test_tune.py PATH/TO/ddp_train", file=sys.stderr)
        return 2
    TRAINER = os.path.abspath(sys.argv.pop(1))
    print(f"test_tune: seed {SEED} (TEST_TUNE_SEED={SEED} repeats it)", flush=True)
    if not ensure_optuna():
        print("SKIP: optuna is missing and pip could not install it (no network?)")
        return SKIP
    result = unittest.main(exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
