"""scaling_sweep.py: run ddp_train at several rank counts and tabulate the throughput.

    launch/scaling_sweep.py --ranks 1,2,4 --mode strong --global-batch 256 --steps 150
    launch/scaling_sweep.py --ranks 1,2 --mode weak --batch-size 128 -- --lr 0.1
    launch/scaling_sweep.py --slurm --slurm-args "--partition=gpu --time=20" --device cuda --ranks 1,8,16

Each run is `mpirun -np N ddp_train --device D --data X --steps S --batch-size B
--metrics <out-dir>/metrics-<mode>-n<N>.jsonl [trainer args after --]`; the
script reads each run's "summary" record and writes <out-dir>/sweep.csv and
<out-dir>/sweep.md (a markdown table with the date, host, cores and command),
and prints the table, and PNG plots next to the CSV (launch/plot_sweep.py, with
Debian's /usr/bin/python3 and python3-matplotlib; skipped with a line without them).

With --slurm each run is a Slurm job instead: `sbatch --wait [--slurm-args]`
of a generated script (<out-dir>/job-<stem>.sbatch) that runs `srun --mpi=pmix
ddp_train <the same arguments>`, one job after the other (see sweep_slurm.py).

  strong scaling: the global batch G is fixed; each rank gets G/N samples per
                  step. Passed as the trainer's --global-batch G when its
                  --help lists that flag, otherwise as --batch-size G/N (the
                  same thing without gradient accumulation).
  weak scaling:   the per-rank batch B is fixed (--batch-size B); the global
                  batch grows as B*N (B*N*K with `-- --grad-accum K`).

--out-dir is the sweep's, but an existing file of a name it writes there
(metrics-*.jsonl, log-*, job-*.sbatch, sweep.csv, sweep.md, the PNGs) is
replaced only if ddp_train or one of its tools wrote it (an earlier sweep's,
said on stderr), or with --overwrite; none may be one of the inputs
(--prediction, --hostfile), even with --overwrite: refused before any run, as
is a --prediction that plot_sweep.py cannot read. The CSV and the table are
written whole (launch/ddp_tools/common/tool_files.py), and every file the
sweep wrote, its runs' metrics and logs included, is recorded as its own.

Standard library only; any python3 >= 3.6.
"""

import argparse
import csv
import datetime
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

from ddp_tools.common import repo_paths, tool_files
from ddp_tools.plots import plot_sweep as plot_sweep_py
from ddp_tools.sweeps import sweep_slurm

REPO = repo_paths.REPO
DEFAULT_TRAINER = os.path.join(REPO, "build", "ddp_train")

CSV_COLUMNS = ["mode", "ranks", "batch_per_rank", "global_batch", "steps", "samples_per_s", "speedup",
               "efficiency", "allreduce_ms_per_step", "wall_s", "test_accuracy"]

# Trainer flags the sweep sets itself; passing them after `--` would contradict the sweep.
OWNED_FLAGS = {
    "--metrics": "the sweep writes one metrics file per run into --out-dir",
    "--steps": "use the sweep's --steps",
    "--epochs": "the sweep runs a fixed --steps",
    "--batch-size": "use the sweep's --batch-size (weak) or --global-batch (strong)",
    "--global-batch": "use the sweep's --global-batch",
    "--device": "use the sweep's --device",
    "--data": "use the sweep's --data",
}

STDERR_TAIL_LINES = 20

WRITER = "scaling_sweep.py --out-dir"  # who wrote the sweep's files, in the output registry


def quote_command(argv):
    return " ".join(shlex.quote(a) for a in argv)


def parse_ranks(text):
    ranks = []
    for item in text.split(","):
        item = item.strip()
        if not re.fullmatch(r"[0-9]+", item) or int(item) < 1:
            raise argparse.ArgumentTypeError("'%s' is not a comma-separated list of positive rank counts" % text)
        if int(item) not in ranks:
            ranks.append(int(item))
    return ranks


def positive_int(text):
    if not re.fullmatch(r"[0-9]+", text.strip()) or int(text) < 1:
        raise argparse.ArgumentTypeError("'%s' is not a positive integer" % text)
    return int(text)


def positive_float(text):
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not v > 0:
        raise argparse.ArgumentTypeError("'%s' is not a positive number" % text)
    return v


def host_cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def build_parser():
    p = argparse.ArgumentParser(
        prog="scaling_sweep.py",
        usage="%(prog)s [options] [-- trainer args...]",
        description="Run ddp_train under mpirun (or as Slurm jobs, --slurm) for several rank counts (strong or weak scaling) and "
                    "tabulate samples/s, speed-up and efficiency from the runs' summary records.",
        epilog="Arguments after `--` go to every ddp_train run (e.g. `-- --threads 1 --lr 0.1`). "
               "Speed-up = samples/s(N) / samples/s(N0), N0 the smallest rank count (normally 1); "
               "efficiency = speed-up / (N/N0).")
    p.add_argument("--ranks", type=parse_ranks, default=[1, 2, 4], metavar="N1,N2,...",
                   help="rank counts to run (default: 1,2,4)")
    p.add_argument("--mode", choices=["strong", "weak"], default="strong",
                   help="strong: fixed --global-batch; weak: fixed per-rank --batch-size (default: strong)")
    p.add_argument("--global-batch", type=positive_int, default=None, metavar="G",
                   help="strong scaling: samples per step over all ranks; must divide by every N (default: 256)")
    p.add_argument("--batch-size", type=positive_int, default=None, metavar="B",
                   help="weak scaling: samples per step per rank (default: 128)")
    p.add_argument("--steps", type=positive_int, default=200, help="training steps per run (default: 200)")
    p.add_argument("--data", default="fashion-mnist", help="ddp_train --data (default: fashion-mnist)")
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu", help="ddp_train --device (default: cpu)")
    p.add_argument("--trainer", default=DEFAULT_TRAINER, metavar="PATH",
                   help="the ddp_train binary (default: build/ddp_train of this checkout)")
    p.add_argument("--mpirun", default="mpirun", metavar="CMD",
                   help="launcher, an mpirun-compatible command that takes -np N; may hold extra options, "
                        "e.g. \"mpirun --mca btl_tcp_if_include eth0\" (default: mpirun)")
    p.add_argument("--hostfile", metavar="PATH",
                   help="passed to the launcher as --hostfile PATH; rank 0 writes the metrics files, so --out-dir "
                        "must then be on a file system every node shares")
    p.add_argument("--bind-to", default="none", metavar="WHAT",
                   help="Open MPI --bind-to (default: none; 'default' leaves Open MPI's policy). Open MPI binds "
                        "each rank to one core when N <= 2, while ddp_train sizes its BLAS threads from the "
                        "host's core count, so N=1 would run all its threads on one core")
    p.add_argument("--no-oversubscribe", action="store_true",
                   help="with --device cpu, do not pass --oversubscribe (then N may not exceed the slots/cores); "
                        "GPU runs never get it: one rank per GPU")
    p.add_argument("--no-mpirun-for-1", action="store_true", help="run N=1 as a plain process, without the launcher")
    p.add_argument("--repeat", type=positive_int, default=1, metavar="R",
                   help="runs per rank count; the table keeps the fastest (least disturbed) one (default: 1)")
    p.add_argument("--timeout", type=positive_float, default=1800.0, metavar="SECONDS",
                   help="limit per run (default: 1800)")
    p.add_argument("--out-dir", metavar="DIR",
                   help="where the metrics files, logs, sweep.csv and sweep.md go "
                        "(default: sweep-results/<date>-<time> under the current directory)")
    tool_files.add_overwrite_flag(p)
    p.add_argument("--dry-run", action="store_true", help="print the commands (with --slurm: the sbatch commands) and exit")
    p.add_argument("--prediction", metavar="FILE",
                   help="a scaling model's prediction CSV, drawn over the measured points in the plots "
                        "(passed to launch/plot_sweep.py --prediction)")
    s = p.add_argument_group("Slurm", "run each point as a Slurm job (sbatch --wait; srun inside) instead of mpirun")
    s.add_argument("--slurm", action="store_true",
                   help="submit each run with sbatch --wait, launching the ranks with srun (--ntasks=N)")
    s.add_argument("--slurm-args", default="", metavar="\"ARGS\"",
                   help="options for every sbatch, after the sweep's own (so they win), e.g. "
                        "\"--partition=gpu --account=proj --time=30 --cpus-per-task=8\"")
    s.add_argument("--sbatch", default="sbatch", metavar="CMD", help="the sbatch command (default: sbatch)")
    s.add_argument("--slurm-mpi", default="pmix", metavar="TYPE",
                   help="srun --mpi=TYPE, how srun hands the tasks to MPI (default: pmix; `srun --mpi=list`)")
    s.add_argument("--gpus-per-node", type=positive_int, default=8, metavar="G",
                   help="with --device cuda: GPUs per node; N ranks take ceil(N/G) nodes, min(N,G) GPUs and "
                        "ranks each (default: 8)")
    return p


def parse_args(argv):
    parser = build_parser()
    if "--" in argv:
        cut = argv.index("--")
        own, extra = argv[:cut], argv[cut + 1:]
    else:
        own, extra = argv, []
    args = parser.parse_args(own)
    args.extra = extra
    args.grad_accum = grad_accum(extra)

    if args.mode == "strong":
        if args.batch_size is not None:
            parser.error("--batch-size is the weak-scaling knob; strong scaling fixes --global-batch")
        if args.global_batch is None:
            args.global_batch = 256
        k = grad_accum(extra)
        bad = [n for n in args.ranks if args.global_batch % (n * k)]
        if bad:
            parser.error("--global-batch %d does not divide by %s ranks%s" %
                         (args.global_batch, ", ".join(str(n) for n in bad),
                          "" if k == 1 else " x --grad-accum %d" % k))
    else:
        if args.global_batch is not None:
            parser.error("--global-batch is the strong-scaling knob; weak scaling fixes --batch-size")
        if args.batch_size is None:
            args.batch_size = 128

    for token in extra:
        flag = token.split("=", 1)[0]
        if flag in OWNED_FLAGS:
            parser.error("trainer argument %s after `--`: %s" % (flag, OWNED_FLAGS[flag]))

    if args.slurm:
        for flag, given in (("--hostfile", args.hostfile), ("--no-mpirun-for-1", args.no_mpirun_for_1),
                            ("--mpirun", args.mpirun != "mpirun"), ("--no-oversubscribe", args.no_oversubscribe)):
            if given:
                parser.error("%s is for the mpirun path; with --slurm, Slurm places the ranks (--slurm-args)" % flag)
        try:
            args.slurm_extra = sweep_slurm.parse_slurm_args(args.slurm_args)
            args.sbatch_launcher = shlex.split(args.sbatch)
        except ValueError as e:
            parser.error("--slurm-args/--sbatch: %s" % e)
        if not args.sbatch_launcher:
            parser.error("--sbatch is empty")
    elif args.slurm_args:
        parser.error("--slurm-args needs --slurm")
    if args.prediction:
        try:  # now, not after the runs, when the plots would be drawn from it
            plot_sweep_py.read_rows(args.prediction, "prediction")
        except plot_sweep_py.SweepError as e:
            parser.error("--prediction: %s" % e)
    try:
        args.launcher = shlex.split(args.mpirun)
    except ValueError as e:
        parser.error("--mpirun: %s" % e)
    if not args.launcher:
        parser.error("--mpirun is empty")
    if args.hostfile and not os.path.isfile(args.hostfile):
        parser.error("--hostfile: %s does not exist" % args.hostfile)
    if not args.dry_run and not (os.path.isfile(args.trainer) and os.access(args.trainer, os.X_OK)):
        parser.error("--trainer: %s is not an executable (build it with launch/build.sh, or pass --trainer PATH)"
                     % args.trainer)
    if args.out_dir is None:
        args.out_dir = os.path.join("sweep-results", datetime.datetime.now().strftime("%Y-%m-%d-%H%M%S"))
    if os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
        parser.error("--out-dir %s: exists and is not a directory" % args.out_dir)
    return args


def check_outputs(args, plan):
    """Refuses (tool_files.FileError) a file of the sweep's that is one of its inputs, or one that exists
    and that this project did not write (without --overwrite), before the first run."""
    if not os.path.isdir(args.out_dir):
        return  # made by the sweep: nothing in it yet
    results = ["sweep.csv", "sweep.md"] + [figure + ".png" for figure in plot_sweep_py.FIGURES]
    outputs = [os.path.join(args.out_dir, name) for name in results]
    for _, _, stem, metrics, _, job in plan:
        outputs += run_files(args.out_dir, stem, metrics, job)
    inputs = [p for p in (args.prediction, args.hostfile) if p]
    tool_files.check_outputs([(path, "the sweep's %s" % path) for path in outputs], inputs, args.overwrite)


def run_files(out_dir, stem, metrics, job):
    """The files one run of the sweep writes: its metrics, its logs and (--slurm) its job script and sbatch log."""
    log_base = os.path.join(out_dir, "log-" + stem)
    return [metrics, log_base + ".out", log_base + ".err"] + ([job[1], log_base + ".sbatch"] if job else [])


def launcher_is_open_mpi(launcher):
    """Open MPI's mpirun takes --allow-run-as-root, --oversubscribe, --bind-to and -x; MPICH's does not."""
    try:
        out = subprocess.run(launcher[:1] + ["--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None  # not found / not runnable: reported when the first run starts
    return "Open MPI" in out or "OpenRTE" in out


def grad_accum(extra):
    """K of a `--grad-accum K` / `--grad-accum=K` trainer argument, 1 without one."""
    for i, token in enumerate(extra):
        value = None
        if token == "--grad-accum" and i + 1 < len(extra):
            value = extra[i + 1]
        elif token.startswith("--grad-accum="):
            value = token.split("=", 1)[1]
        if value is not None:
            try:
                return max(1, int(value))
            except ValueError:
                return 1  # the trainer rejects it
    return 1


def trainer_has_flag(trainer, flag):
    try:
        out = subprocess.run([trainer, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return re.search(r"^\s*" + re.escape(flag) + r"\b", out, re.M) is not None


def per_rank_batch(args, n):
    """Samples per micro-batch per rank."""
    return args.global_batch // (n * args.grad_accum) if args.mode == "strong" else args.batch_size


def trainer_command(args, n, metrics_path):
    """ddp_train and its arguments, the same under mpirun and srun."""
    if args.mode == "strong" and args.use_global_batch:
        batch = ["--global-batch", str(args.global_batch)]
    else:
        batch = ["--batch-size", str(per_rank_batch(args, n))]
    return [args.trainer, "--device", args.device, "--data", args.data, "--steps", str(args.steps)] + batch + \
        ["--metrics", metrics_path] + args.extra


def run_command(args, n, metrics_path, open_mpi):
    trainer = trainer_command(args, n, metrics_path)
    if n == 1 and args.no_mpirun_for_1:
        return trainer
    cmd = list(args.launcher) + ["-np", str(n)]
    if open_mpi:
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        if args.device == "cpu" and not args.no_oversubscribe:
            cmd.append("--oversubscribe")
        if args.bind_to != "default":
            cmd += ["--bind-to", args.bind_to]
        if args.hostfile:
            cmd += ["-x", "OPENBLAS_NUM_THREADS"]  # reaches ranks on other nodes too
    if args.hostfile:
        cmd += ["--hostfile", args.hostfile]
    return cmd + trainer


PLOT_PYTHON = "/usr/bin/python3"  # Debian's, which sees python3-matplotlib


def plot_sweep(csv_path, prediction, out_dir, overwrite):
    """PNG plots next to the CSV through launch/plot_sweep.py, or one line saying why not."""
    script = os.path.join(repo_paths.LAUNCH, "plot_sweep.py")
    why = None
    if not os.path.isfile(script):
        why = "%s is not there" % script
    elif not os.access(PLOT_PYTHON, os.X_OK):
        why = "%s is not there" % PLOT_PYTHON
    elif subprocess.run([PLOT_PYTHON, "-c", "import matplotlib"], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode != 0:
        why = "%s cannot import matplotlib (Debian: python3-matplotlib, see launch/install_deps.sh)" % PLOT_PYTHON
    if why:
        print("plots skipped: %s%s" % (why, " (--prediction unused)" if prediction else ""))
        return
    cmd = [PLOT_PYTHON, script, csv_path] + (["--prediction", prediction] if prediction else []) + ["-o", out_dir]
    cmd += ["--overwrite"] if overwrite else []
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if proc.stdout.strip():
        print(proc.stdout.rstrip())
    if proc.returncode != 0:
        # The measured table is written and worth keeping: say so, but do not fail the sweep for a plot.
        print("scaling_sweep: plotting failed (exit status %d): %s" % (proc.returncode, quote_command(cmd)),
              file=sys.stderr)


def record_run(out_dir, stem, metrics, job):
    """Records as the sweep's the files of a run that its ddp_train wrote (the metrics) and, with --slurm,
    Slurm (the job's logs): outputs of the sweep, which a later sweep into this --out-dir replaces."""
    log_base = os.path.join(out_dir, "log-" + stem)
    for path in [metrics] + ([log_base + ".out", log_base + ".err"] if job else []):
        if os.path.isfile(path):
            tool_files.record(path, WRITER)


def tail(path, lines):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()[-lines:]
    except OSError:
        return []


def read_summary(path):
    """The last "summary" record of a metrics JSON Lines file, or None."""
    summary = None
    try:
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and rec.get("event") == "summary":
                    summary = rec
    except OSError:
        return None
    return summary


class RunFailed(Exception):
    pass


def execute(cmd, env, log_base, timeout):
    """Runs cmd with stdout/stderr to log_base.{out,err}; returns the elapsed seconds or raises RunFailed."""
    start = time.time()
    try:
        out = tool_files.open_output(log_base + ".out", log_base + ".out", WRITER)
        err = tool_files.open_output(log_base + ".err", log_base + ".err", WRITER)
    except tool_files.FileError as e:
        raise RunFailed(str(e))
    with out, err:
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True)
        except OSError as e:
            raise RunFailed("cannot start %s: %s" % (cmd[0], e))
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            raise RunFailed("timed out after %.0f s (--timeout)" % timeout)
        except KeyboardInterrupt:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
            raise
    if rc != 0:
        raise RunFailed("exit status %d" % rc if rc > 0 else "killed by signal %d" % -rc)
    return time.time() - start


def threads_from_log(path):
    """BLAS threads per rank from rank 0's `device: CPU (OpenBLAS, 2 threads, ...)` line, or ''."""
    try:
        with open(path, errors="replace") as f:
            head = [next(f, "") for _ in range(50)]
    except OSError:
        return ""
    for line in head:
        m = re.match(r"device: CPU \([^,]*, ([0-9]+) threads?", line)
        if m:
            return m.group(1)
    return ""


def fmt(v, digits):
    if v is None or v == "":
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "%.*f" % (digits, v)
    return str(v)


def num(rec, key):
    v = rec.get(key)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def markdown_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def main(argv):
    args = parse_args(argv)
    cores = host_cores()
    host = socket.gethostname()
    started = datetime.datetime.now()
    sweep_cmd = quote_command([sys.argv[0]] + argv)

    open_mpi = True
    if not args.slurm and not (args.no_mpirun_for_1 and args.ranks == [1]):
        open_mpi = launcher_is_open_mpi(args.launcher)
        if open_mpi is None:
            if not args.dry_run:
                print("scaling_sweep: cannot run the launcher `%s --version`; is MPI installed?" % args.launcher[0],
                      file=sys.stderr)
                return 1
            open_mpi = True
        elif not open_mpi:
            print("scaling_sweep: %s is not Open MPI's; not adding --allow-run-as-root/--oversubscribe/--bind-to"
                  % args.launcher[0], file=sys.stderr)

    args.use_global_batch = args.mode == "strong" and trainer_has_flag(args.trainer, "--global-batch")
    if args.grad_accum > 1 and not args.use_global_batch and args.mode == "strong":
        print("scaling_sweep: %s has no --global-batch; --grad-accum %d would multiply the global batch"
              % (args.trainer, args.grad_accum), file=sys.stderr)
        return 2

    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = "1"  # ddp_train sets its own BLAS thread count (--threads; 0: cores / local ranks)
    if os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

    out_dir = args.out_dir
    plan = []
    for n in args.ranks:
        for r in range(args.repeat):
            stem = "%s-n%d" % (args.mode, n) + ("-r%d" % (r + 1) if args.repeat > 1 else "")
            # Absolute: rank 0 writes it, and with --hostfile rank 0 may run on another node (shared file system).
            metrics = os.path.abspath(os.path.join(out_dir, "metrics-%s.jsonl" % stem))
            cmd = run_command(args, n, metrics, open_mpi)
            job = None
            if args.slurm:
                # What runs is srun + the trainer; sbatch (the job) is how it gets there.
                cmd = sweep_slurm.srun_command(args, trainer_command(args, n, metrics))
                log_base = os.path.abspath(os.path.join(out_dir, "log-" + stem))
                script = os.path.abspath(os.path.join(out_dir, "job-%s.sbatch" % stem))
                job = (sweep_slurm.sbatch_command(args, n, stem, log_base, script), script,
                       sweep_slurm.job_script(stem, cmd))
            plan.append((n, r, stem, metrics, cmd, job))

    try:
        check_outputs(args, plan)
    except tool_files.FileError as e:
        print("scaling_sweep.py: error: %s" % e, file=sys.stderr)
        return 2

    if args.dry_run:
        for _, _, _, _, cmd, job in plan:
            if job:
                print(quote_command(job[0]))
                print("  # %s runs: %s" % (os.path.basename(job[1]), quote_command(cmd)))
            else:
                print(quote_command(cmd))
        return 0

    os.makedirs(out_dir, exist_ok=True)
    print("scaling sweep: %s scaling, ranks %s, %d steps, %s on %s (%d cores), results in %s" %
          (args.mode, ",".join(str(n) for n in args.ranks), args.steps, args.device, host, cores, out_dir),
          flush=True)

    best = {}  # n -> (summary, threads, command, elapsed)
    for i, (n, r, stem, metrics, cmd, job) in enumerate(plan):
        tag = "[%d/%d] N=%d%s" % (i + 1, len(plan), n, " run %d/%d" % (r + 1, args.repeat) if args.repeat > 1 else "")
        if os.path.exists(metrics):
            os.remove(metrics)
        log_base = os.path.join(out_dir, "log-" + stem)
        print("%s %s: started, batch %d per rank  (%s)" %
              (time.strftime("%H:%M:%S"), tag, per_rank_batch(args, n), quote_command(job[0] if job else cmd)),
              flush=True)
        try:
            if job:
                try:
                    elapsed = sweep_slurm.submit(job[0], job[1], job[2], env, os.path.abspath(log_base), args.timeout)
                except sweep_slurm.SubmitFailed as e:
                    raise RunFailed(str(e))
            else:
                elapsed = execute(cmd, env, log_base, args.timeout)
            summary = read_summary(metrics)
            if summary is None:
                raise RunFailed("it wrote no summary record to %s" % metrics)
            world = num(summary, "world_size")
            if world is not None and int(world) != n:
                raise RunFailed("the trainer ran with world size %d, not %d: is it built with MPI (DDP_MPI=ON), "
                                "and %s?" % (int(world), n,
                                             "does srun --mpi=%s reach the MPI it was built with" % args.slurm_mpi
                                             if args.slurm else "is `%s` the MPI it was built with" % args.launcher[0]))
        except RunFailed as e:
            record_run(out_dir, stem, metrics, job)
            print("%s %s: FAILED: %s" % (time.strftime("%H:%M:%S"), tag, e), file=sys.stderr)
            which = ".err" if tail(log_base + ".err", 1) else ".out"
            lines = tail(log_base + which, STDERR_TAIL_LINES)
            # The trainer's own error line can sit above mpirun's boilerplate: show it first.
            errors = [l for l in tail(log_base + ".err", 10000) if l.startswith("ddp_train: error") and l not in lines]
            for line in errors[:5]:
                print("  " + line, file=sys.stderr)
            if lines:
                print("  last lines of %s%s:" % (log_base, which), file=sys.stderr)
                for line in lines:
                    print("  | " + line, file=sys.stderr)
            print("command: " + quote_command(job[0] if job else cmd), file=sys.stderr)
            return 1
        record_run(out_dir, stem, metrics, job)
        sps = num(summary, "samples_per_s")
        print("%s %s: finished in %.1f s, %s samples/s" %
              (time.strftime("%H:%M:%S"), tag, elapsed, fmt(sps, 0) or "?"), flush=True)
        if n not in best or (num(best[n][0], "samples_per_s") or 0) < (sps or 0):
            best[n] = (summary, threads_from_log(log_base + ".out"), cmd, elapsed)

    # Speed-up and efficiency against the smallest rank count N0 (normally 1):
    #   speed-up(N)   = samples/s(N) / samples/s(N0)
    #   efficiency(N) = speed-up(N) / (N / N0)
    # For strong scaling this is the usual speed-up / N. For weak scaling the usual
    # definition is samples/s(N) / (N x samples/s(1)), the time per step at N
    # against at 1 with N times the work -- algebraically the same formula, so
    # one computation serves both modes.
    base_n = min(args.ranks)
    base_sps = num(best[base_n][0], "samples_per_s")
    rows = []
    for n in args.ranks:
        s, threads, cmd, elapsed = best[n]
        sps = num(s, "samples_per_s")
        speedup = sps / base_sps if sps is not None and base_sps else None
        eff = speedup / (n / base_n) if speedup is not None else None
        bpr = num(s, "batch_per_rank")
        gb = num(s, "global_batch")
        rows.append({
            "mode": args.mode,
            "ranks": n,
            "batch_per_rank": int(bpr) if bpr is not None else per_rank_batch(args, n),
            "global_batch": int(gb) if gb is not None else per_rank_batch(args, n) * n * args.grad_accum,
            "steps": int(num(s, "steps")) if num(s, "steps") is not None else "",
            "samples_per_s": sps,
            "speedup": speedup,
            "efficiency": eff,
            "allreduce_ms_per_step": num(s, "allreduce_ms_per_step"),
            "wall_s": num(s, "wall_s"),
            "test_accuracy": num(s, "test_accuracy"),
            "_threads": threads,
            "_cmd": cmd,
        })

    digits = {"samples_per_s": 1, "speedup": 3, "efficiency": 3, "allreduce_ms_per_step": 3, "wall_s": 3,
              "test_accuracy": 4}
    csv_path = os.path.join(out_dir, "sweep.csv")

    def write_csv(f):
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for row in rows:
            w.writerow([fmt(row[c], digits.get(c, 0)) for c in CSV_COLUMNS])
    tool_files.write_atomic(csv_path, csv_path, write_csv, WRITER)

    local = not args.hostfile and not args.slurm
    header = ["mode", "ranks", "batch/rank", "global batch", "steps", "samples/s", "speed-up", "efficiency",
              "all-reduce ms/step", "wall s", "test acc.", "BLAS threads/rank"]
    table = []
    for row in rows:
        acc = row["test_accuracy"]
        note = ""
        if local and args.device == "cpu" and row["ranks"] > cores:
            note = " (oversubscribed)"
        table.append([row["mode"], str(row["ranks"]) + note, str(row["batch_per_rank"]), str(row["global_batch"]),
                      str(row["steps"]), fmt(row["samples_per_s"], 0), fmt(row["speedup"], 2),
                      ("%.0f%%" % (100 * row["efficiency"])) if row["efficiency"] is not None else "",
                      fmt(row["allreduce_ms_per_step"], 2), fmt(row["wall_s"], 2),
                      ("%.2f%%" % (100 * acc)) if acc is not None else "", row["_threads"]])

    notes = [
        "samples/s: the run's summary record (training steps only; start-up, data loading and evaluation are not "
        "timed). speed-up = samples/s(N) / samples/s(%d); efficiency = speed-up / (N/%d)%s. "
        "For weak scaling this equals samples/s(N) / (N x samples/s(1)): the same formula." %
        (base_n, base_n, "" if base_n == 1 else " (no N=1 run: the baseline is N=%d)" % base_n),
    ]
    if args.repeat > 1:
        notes.append("Each rank count ran %d times; the table keeps the fastest run." % args.repeat)
    if not any(row["allreduce_ms_per_step"] is not None for row in rows):
        notes.append("all-reduce ms/step: empty, this trainer's summary record does not report it yet.")
    if args.slurm:
        notes.append("Each run was a Slurm job (sbatch --wait%s; srun --mpi=%s): the host and cores above are the "
                     "submitting host's, the first line of each log-<stem>.out names the job's nodes." %
                     (" " + args.slurm_args if args.slurm_args else "", args.slurm_mpi))
    if local and args.device == "cpu":
        threads_given = any(t == "--threads" or t.startswith("--threads=") for t in args.extra)
        if threads_given:
            notes.append(
                "All runs share this host's %d cores, with the BLAS threads per rank fixed by --threads: up to "
                "N x threads = %d cores, a higher N brings more cores into play." % (cores, cores))
        else:
            notes.append(
                "All runs share this host's %d cores, and ddp_train gives each rank max(1, cores / ranks) BLAS "
                "threads, so N=1 already uses every core: the speed-up compares ranks with threads on the same "
                "cores, not more hardware. 1.00 would mean ranks cost nothing against threads, and the efficiency "
                "(speed-up / N) can reach only about 1/N here by construction. For a per-core curve up to N = %d, "
                "pass `-- --threads 1`." % (cores, cores))
        over = [row["ranks"] for row in rows if row["ranks"] > cores]
        if over:
            notes.append(
                "N = %s exceed%s the %d cores: those ranks are oversubscribed (time-sliced, 1 thread each), so their "
                "efficiency measures the oversubscription, not the trainer's scaling. Use a multi-core host or "
                "--hostfile for real figures." %
                (", ".join(str(n) for n in over), "s" if len(over) == 1 else "", cores))

    md = ["# ddp_train scaling sweep (%s scaling)" % args.mode, "",
          "%s on %s, %d cores; command: `%s`" % (started.strftime("%Y-%m-%d %H:%M"), host, cores, sweep_cmd), ""]
    md += markdown_table(header, table) + [""]
    md += ["- " + n for n in notes] + ["", "Runs:", ""]
    md += ["- N=%d: `%s`" % (row["ranks"], quote_command(row["_cmd"])) for row in rows]
    md_path = os.path.join(out_dir, "sweep.md")
    tool_files.write_text_atomic(md_path, md_path, "\n".join(md) + "\n", WRITER)

    print()
    print("%s on %s, %d cores; command: %s" % (started.strftime("%Y-%m-%d %H:%M"), host, cores, sweep_cmd))
    print("\n".join(markdown_table(header, table)))
    print()
    for n in notes:
        print("- " + n)
    print()
    print("wrote %s and %s" % (csv_path, os.path.join(out_dir, "sweep.md")))
    plot_sweep(csv_path, args.prediction, out_dir, args.overwrite)
    return 0


def cli():
    try:
        return main(sys.argv[1:])
    except KeyboardInterrupt:
        print("\nscaling_sweep: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(cli())
