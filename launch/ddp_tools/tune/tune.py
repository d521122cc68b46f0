r"""tune.py: search ddp_train's hyperparameters with Optuna (TPE sampler, median pruner).

  launch/tune.py --study-dir DIR --trials N --objective test_accuracy \
      --param lr=log:1e-4:1e-1 --param batch-size=choice:64,128,256 \
      [--enqueue "lr=0.05,batch-size=128"] [--ranks N | --launcher "srun ..."] -- <every trial's args>

The study is DIR/study.db (SQLite). --trials N is the study's total: trials that
ended (complete, pruned or failed; not ones interrupted by a stop of tune.py)
count, so re-running the same command after an interruption finishes the search,
and a larger N extends it. Each trial keeps DIR/trial-NNNN/{command.txt,log.txt,
metrics.jsonl}. At the end: DIR/trials.md (printed too), DIR/best.ini, DIR/*.png.
An existing file of one of those names is replaced only if ddp_train or one of
its tools wrote it (an earlier search's, said on stderr), or with --overwrite:
the report's files are checked before any trial, a trial's before it starts
(launch/ddp_tools/common/tool_files.py).

Pruning: MedianPruner(n_startup_trials=2, n_warmup_steps=--prune-warmup, 0 by
default): once two trials have
completed, a trial whose intermediate value is worse than the completed trials'
median at the same step is stopped (SIGTERM). Two, so that a median exists to
compare with after the fewest trials (a search of ~12 can prune from its third);
no warm-up by default, so a diverging trial is stopped at its first evaluation
(a short cosine schedule ranks trials poorly early on: see --prune-warmup). With a
batch-shape flag searched, intermediate values are per epoch (--report-at auto):
steps of different batch sizes are not the same progress. A trial's last value
is its result and never pruned on (a trial that finished is complete). Values
are read as the trial writes them; a value worse than the median is pruned
even if the trial has ended meanwhile, so which trial is pruned does not depend
on timing. A null value (a non-finite loss) is the worst possible.
Bad input is one line on stderr and exit status 2, before any trial.
"""

import argparse
import math
import os
import shlex
import shutil
import signal
import sys
from pathlib import Path

from ddp_tools.common import repo_paths, tool_files
from ddp_tools.tune import tune_space
from ddp_tools.tune.tune_space import SpecError

STUDY_FILE = "study.db"
SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def parse_args(argv):
    own, trial_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    ap = _OneLineParser(prog="tune.py", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--study-dir", required=True, type=Path, help="study.db, trial directories, outputs")
    ap.add_argument("--study-name", default="ddp_train", help="the study's name in study.db")
    ap.add_argument("--trials", type=int, required=True, help="the study's total of ended trials")
    ap.add_argument("--timeout", type=float, default=None, help="seconds after which no new trial starts")
    ap.add_argument("--seed", type=int, default=0, help="the TPE sampler's seed")
    ap.add_argument("--objective", required=True, help=", ".join(tune_space.OBJECTIVES))
    ap.add_argument("--direction", choices=("minimize", "maximize"), help="default: from the objective")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=KIND:SPEC",
                    help="log:LOW:HIGH | float:LOW:HIGH | int:LOW:HIGH | choice:A,B,...")
    ap.add_argument("--enqueue", action="append", default=[], metavar="NAME=V,...",
                    help="a trial to run first (e.g. the default recipe); once per study")
    ap.add_argument("--startup-trials", type=int, default=5, help="random trials before TPE")
    ap.add_argument("--prune-warmup", type=int, default=0, metavar="N",
                    help="prune no trial before its report N, in the reports' unit (a step, or "
                    "an epoch with --report-at epoch); the median pruner's n_warmup_steps")
    ap.add_argument("--report-at", choices=("auto", "step", "epoch"), default="auto",
                    help="intermediate values per eval step or per epoch (auto: epoch when a "
                    "batch-shape flag is searched)")
    launch = ap.add_mutually_exclusive_group()
    launch.add_argument("--ranks", type=int, help="run each trial under mpirun -np N --oversubscribe")
    launch.add_argument("--launcher", help="a command line to prefix each trial with (e.g. 'srun -n 4')")
    ap.add_argument("--trainer", help="ddp_train (default: build/ddp_train, else PATH's)")
    tool_files.add_overwrite_flag(ap)
    args = ap.parse_args(own)
    args.trial_args = trial_args
    return args


def build_config(args):
    """Everything the trials need, checked: raises SpecError on the first problem."""
    if args.trials < 1:
        raise SpecError("--trials: must be at least 1")
    if not args.param:
        raise SpecError("--param: give at least one flag to search")
    if args.prune_warmup < 0:
        raise SpecError("--prune-warmup: must be at least 0")
    if args.ranks is not None and args.ranks < 1:
        raise SpecError("--ranks: must be at least 1")
    if args.timeout is not None and not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise SpecError(f"--timeout {args.timeout}: must be a number of seconds above 0")
    if args.startup_trials < 0:
        raise SpecError("--startup-trials: must be at least 0")
    if not 0 <= args.seed < 2 ** 32:
        raise SpecError(f"--seed {args.seed}: must be from 0 to 2^32 - 1 (numpy's range)")
    _check_study_dir(args.study_dir)
    _check_report_files(args.study_dir, args.overwrite)
    params = [tune_space.parse_param(spec) for spec in args.param]
    trainer = _find_trainer(args.trainer)
    flags = tune_space.read_trainer_help([trainer])
    tune_space.check_space(params, flags, args.trial_args)
    key, direction = tune_space.objective_metric(args.objective, args.direction, args.trial_args)
    enqueued = [tune_space.parse_enqueue(text, params) for text in args.enqueue]
    mode = args.report_at
    if mode == "auto":
        shaped = any(p.name in tune_space.BATCH_SHAPE_FLAGS for p in params)
        mode = "epoch" if shaped else "step"
    cfg = argparse.Namespace(params=params, trainer=[trainer], trial_args=args.trial_args,
                             metric_key=key, direction=direction, report_mode=mode,
                             enqueued=enqueued, study_dir=args.study_dir.resolve(), overwrite=args.overwrite)
    cfg.launcher = _launcher(args)
    return cfg


def _check_study_dir(study_dir):
    """Refuses a --study-dir that is not a directory, and a study.db that is not a SQLite
    file (another program's, or a directory): Optuna would fail on either with a traceback.
    An empty study.db is fine (SQLite makes it a new database)."""
    if study_dir.exists() and not study_dir.is_dir():
        raise SpecError(f"--study-dir {study_dir}: exists and is not a directory")
    db = study_dir / STUDY_FILE
    if db.is_dir():
        raise SpecError(f"--study-dir {study_dir}: {STUDY_FILE} is a directory, not a study")
    if db.exists():
        try:
            with open(db, "rb") as f:
                head = f.read(len(SQLITE_MAGIC))
        except OSError as err:
            raise SpecError(f"--study-dir {study_dir}: cannot read {STUDY_FILE} ({err.strerror})") from None
        if head and head != SQLITE_MAGIC:
            raise SpecError(f"--study-dir {study_dir}: {STUDY_FILE} is not a SQLite database (not a "
                            "study of tune.py: move it away or choose another --study-dir)")


def _check_report_files(study_dir, overwrite):
    """Refuses, before any trial, a report file (trials.md, best.ini, a plot) in an existing --study-dir
    that this project did not write, unless overwrite."""
    if not study_dir.is_dir():
        return  # made by the search: nothing in it yet
    from ddp_tools.tune.tune_report import REPORT_FILES
    try:
        tool_files.check_outputs([(str(study_dir / name),) * 2 for name in REPORT_FILES], overwrite=overwrite)
    except tool_files.FileError as err:
        raise SpecError(str(err)) from None


def _find_trainer(given):
    if given:
        path = Path(given)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise SpecError(f"--trainer {given}: not an executable file")
        return str(path.resolve())
    built = Path(repo_paths.REPO).resolve() / "build" / "ddp_train"
    if built.is_file():
        return str(built)
    found = shutil.which("ddp_train")
    if not found:
        raise SpecError("--trainer: no build/ddp_train and no ddp_train on PATH")
    return found


def _launcher(args):
    """The launcher's words, its program checked now: a trial that cannot start is bad input."""
    if args.launcher:
        try:
            words = shlex.split(args.launcher)
        except ValueError as err:
            raise SpecError(f"--launcher {args.launcher}: {err}") from None
        flag = "--launcher"
    elif args.ranks:
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        words = ["mpirun", "-np", str(args.ranks), "--oversubscribe"] + root
        flag = "--ranks (mpirun)"
    else:
        return []
    if words and not shutil.which(words[0]):
        raise SpecError(f"{flag}: {words[0]} is not a command on PATH or an executable file")
    return words


def open_study(args, cfg):
    """The study in study.db (created, or loaded with the same objective and direction)."""
    import optuna
    import sqlalchemy.exc
    # Optuna logs every failed or interrupted trial at WARNING with its traceback; tune.py
    # says in one line what became of each trial (_print_trial, the interruption).
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    cfg.study_dir.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{cfg.study_dir / STUDY_FILE}"
    sampler = optuna.samplers.TPESampler(seed=args.seed, n_startup_trials=args.startup_trials)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=args.prune_warmup,
                                         interval_steps=1)
    try:
        study = optuna.create_study(storage=storage, study_name=args.study_name, sampler=sampler,
                                    pruner=pruner, direction=cfg.direction, load_if_exists=True)
    except sqlalchemy.exc.SQLAlchemyError as err:  # a SQLite file cut short, or another program's
        said = str(getattr(err, "orig", None) or err).splitlines()[0]
        raise SpecError(f"--study-dir {args.study_dir}: {STUDY_FILE} is not a readable study ({said})") from None
    stored = study.user_attrs.get("objective")
    if stored is None:
        study.set_user_attr("objective", args.objective)
    elif stored != args.objective or study.direction.name.lower() != cfg.direction:
        raise SpecError(f"--study-dir {args.study_dir}: its study '{args.study_name}' optimises "
                        f"{stored} ({study.direction.name.lower()}), not {args.objective} ({cfg.direction})")
    _close_stale(study)
    for values in cfg.enqueued:
        _enqueue_once(study, values)
    return study


def _enqueue_once(study, values):
    """Enqueues values unless a waiting or ended trial has them: a resumed search runs an
    --enqueue trial once, and again only if tune.py was stopped while it ran (Optuna's
    skip_if_exists would also skip an interrupted one)."""
    from optuna.trial import TrialState
    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    for t in waiting + ended_trials(study):
        if t.system_attrs.get("fixed_params", t.params) == values:
            return
    study.enqueue_trial(values)


def _close_stale(study):
    """Trials left RUNNING by a tune.py that was killed outright: failed, and not counted."""
    from optuna.trial import TrialState
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(t.number, state=TrialState.FAIL)


def ended_trials(study):
    """The trials that count toward --trials (an interrupted trial has no wall_s, or a mark)."""
    from optuna.trial import TrialState
    ended = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    return [t for t in study.get_trials(deepcopy=False, states=ended)
            if "wall_s" in t.user_attrs and not t.user_attrs.get("interrupted")]


def _print_trial(study, trial):
    t = trial
    params = " ".join(f"{k}={tune_space.format_value(v)}" for k, v in t.params.items())
    state = t.state.name.lower()
    value = "" if t.value is None else f" {t.value:.6g}"
    if "pruned_at" in t.user_attrs:
        state += f" at {t.user_attrs['pruned_at']}"
    if "fail_reason" in t.user_attrs:
        state += f" ({t.user_attrs['fail_reason']}: trial-{t.number:04d}/log.txt)"
    wall = t.user_attrs.get("wall_s")
    print(f"tune: trial {t.number} {state}{value}  {params}" + (f"  ({wall:.1f} s)" if wall else ""),
          flush=True)


def search(args, cfg, study):
    from ddp_tools.tune import tune_trial
    remaining = args.trials - len(ended_trials(study))
    if remaining <= 0:
        print(f"tune: the study already has {len(ended_trials(study))} ended trials (--trials "
              f"{args.trials}); nothing to run", flush=True)
        return
    print(f"tune: {remaining} trial(s) to run in {cfg.study_dir / STUDY_FILE}", flush=True)
    study.optimize(lambda trial: tune_trial.run_trial(trial, cfg), n_trials=remaining,
                   timeout=args.timeout, catch=(tune_trial.TrialFailed,),
                   callbacks=[_print_trial])


def report(args, cfg, study):
    from ddp_tools.tune import tune_report
    names = [p.name for p in cfg.params]
    table = tune_report.trials_table(study, args.objective, names)
    tune_report.write_text(cfg.study_dir / "trials.md", table)
    print(table, end="")
    if tune_report._best_number(study) is None:
        print("tune: no trial completed: no best.ini, no plots", file=sys.stderr)
        return 1
    tune_report.write_best_ini(study, cfg.study_dir / "best.ini", args.objective, cfg.trial_args)
    plots = tune_report.write_plots(study, cfg.study_dir, args.objective)
    best = study.best_trial
    print(f"tune: best trial {best.number}: {args.objective} {best.value:.6g}; "
          f"{cfg.study_dir / 'best.ini'}, plots {', '.join(plots)}")
    return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class _OneLineParser(argparse.ArgumentParser):
    """argparse, with a usage error in one line (no usage text) and exit status 2."""

    def error(self, message):
        print(f"tune.py: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def main(argv):
    args = parse_args(argv)
    try:
        cfg = build_config(args)
        study = open_study(args, cfg)
    except SpecError as err:
        print(f"tune.py: error: {err}", file=sys.stderr)
        return 2
    except ImportError as err:
        print(f"tune.py: error: {err.name} is not installed (launch/install_deps.sh)", file=sys.stderr)
        return 2
    # SIGTERM of tune.py ends it as Ctrl-C does: the running trial is stopped and marked.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        search(args, cfg, study)
        return report(args, cfg, study)
    except KeyboardInterrupt:
        print("tune: interrupted; re-run the same command to resume", file=sys.stderr)
        return 130
    except tool_files.FileError as err:  # a trial's file, trials.md, best.ini or a plot (a full disk)
        print(f"tune.py: error: {err}", file=sys.stderr)
        return 2


def cli():
    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(cli())
