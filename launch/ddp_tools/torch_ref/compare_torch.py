"""compare_torch.py: ours (`ddp_train --bench`) against PyTorch
(launch/torch_reference.py) on the same models, batches, devices and cores.

Each repeat runs every configuration once, ours and PyTorch eager one after
the other, so that drift of the machine (clocks, other load) falls on both
sides alike; the PyTorch compile runs come after all of those (each one
compiles first, for tens of seconds on a GPU, so under --budget-s they are
the cells that come up short). A cell is the median over the repeats that
succeeded. A failed run is a cell ("failed", "timeout"), its stderr tail goes
to the log, and the script carries on. The table is rewritten after every
run, so a run cut short still leaves the table of what finished.

Reference models (--models):
  a  784-1024-1024-10, softmax cross-entropy, batch 256 per rank
  b  10-10, MSE, batch 64 (launch- and overhead-bound)
  c  4096-4096-4096-4096-4096, MSE, batch 4096 on GPU; 256 on CPU (a 4096
     batch would take minutes per step on a few cores)
  g  the README's GPT: 4 layers, 4 heads, 128 wide, T 128, vocabulary 256,
     batch 16 windows per rank
  gpt2  GPT-2 124M: 12 layers, 12 heads, 768 wide, T 1024, vocabulary
     50304 (GPT-2's 50257 padded), batch 8; CUDA only
GPT rows are in tokens/s (windows/s x T) in a table of their own, with
both sides' MFU; both sides train with AdamW (lr 2e-3, weight decay 0.1 on
tensors of rank >= 2, betas 0.9/0.999, eps 1e-8): ours --optimizer adamw,
PyTorch torch_reference.py --model gpt (launch/ddp_tools/torch_ref/torch_reference_gpt.py: fp32
on CPU with the faster of its explicit and SDPA attention, AMP with
scaled_dot_product_attention (flash) and fused AdamW on CUDA).

Threads: on CPU each side gets T = cores/N threads per rank with N ranks
(--threads overrides): ours through --threads (and OPENBLAS_NUM_THREADS =
OMP_NUM_THREADS = T). PyTorch gets its best of two configurations
(--torch-threads-configs picks; launch/ddp_tools/torch_ref/torch_thread_configs.py says why):
  intra  torch.set_num_threads(T), OMP_NUM_THREADS=T, OPENBLAS_NUM_THREADS=T
  blas   torch.set_num_threads(1), OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=T
         (Debian's torch runs Linear's GEMMs on OpenBLAS's own pool, which
         set_num_threads does not size)
Each repeat runs every configuration, one after the other beside ours, their
order turning from repeat to repeat; the PyTorch cell is the configuration
with the higher median, the table names it with the other's median beside
it, and ours/PyTorch is against that better one. The CSV keeps every
configuration's median, the log and .runs.jsonl every run (with the pool
sizes the loaded OpenBLAS reports). At T = 1 both are one configuration, run
once. Both sides run with OMP_WAIT_POLICY=PASSIVE (torch's idle OpenMP
threads would otherwise spin on the cores OpenBLAS's threads need; see
torch_reference.py). On CUDA the threads are left at their defaults.

Ours with N > 1 ranks runs under `mpirun -np N` (--oversubscribe,
--bind-to none like PyTorch's unbound processes, --allow-run-as-root as
root); N = 1 runs the binary directly. PyTorch uses DDP over gloo
(torch_reference.py --ranks N). On CUDA only one rank is run (one GPU).

--out and the files beside it are checked before the first run: an existing
one that neither ddp_train nor one of its tools wrote is refused (exit 2)
unless --overwrite; an earlier run's is replaced, said on stderr
(launch/ddp_tools/common/tool_files.py).

Example: python3 launch/compare_torch.py --device cpu --models a,b --ranks 1,2 --out /tmp/cmp.md
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

from ddp_tools.common import repo_paths, tool_files
from ddp_tools.torch_ref import compare_torch_table
from ddp_tools.torch_ref import torch_thread_configs
from ddp_tools.torch_ref.compare_torch_models import GPT_ADAMW, MODELS, PEAK_TFLOPS_BY_NAME, STEPS

ROOT = repo_paths.REPO
TORCH_REFERENCE = os.path.join(repo_paths.LAUNCH, "torch_reference.py")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--models", default="a,b,c", help="comma-separated subset of a,b,c,g,gpt2")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--precision", choices=["fp16", "bf16"], default="fp16",
                   help="bf16: ours --precision bf16 against torch.autocast(bfloat16) (fp16: ours FP16 against "
                        "autocast float16 + GradScaler on CUDA, FP32 on CPU)")
    p.add_argument("--ranks", default="1", help="comma-separated rank counts (CPU; CUDA runs 1)")
    p.add_argument("--repeats", type=int, default=3, help="runs per cell; the median is reported")
    p.add_argument("--modes", default="", help="PyTorch modes (default: eager,compile)")
    p.add_argument("--ddp-train", default=os.path.join(ROOT, "build", "ddp_train"), help="our binary")
    p.add_argument("--ours-cmd", default="",
                   help="command line to run instead of --ddp-train (a stub for testing); the bench flags are appended")
    p.add_argument("--ours-flags", default="",
                   help="extra flags for our side, e.g. --ours-flags=--cuda-graph (said in the table's header)")
    p.add_argument("--python", default="", help="interpreter with torch (default: /usr/bin/python3 when it has torch, else python3)")
    p.add_argument("--threads", type=int, default=0, help="CPU threads per rank, T (0: cores / ranks)")
    p.add_argument("--torch-threads-configs", default=torch_thread_configs.DEFAULT,
                   help="PyTorch's CPU thread configurations to try, the better reported: "
                   + "; ".join(f"{k}: {v}" for k, v in torch_thread_configs.DESCRIPTIONS.items()))
    p.add_argument("--bench-warmup", type=int, default=0, help="warm-up steps for every model (0: per-model default)")
    p.add_argument("--bench-steps", type=int, default=0, help="timed steps for every model (0: per-model default)")
    p.add_argument("--run-timeout", type=float, default=120.0, help="seconds per run")
    p.add_argument("--budget-s", type=float, default=0.0,
                   help="stop starting runs after this many seconds in all (0: no limit); later cells read 'skipped'")
    p.add_argument("--out", default="", help="write the table here (Markdown), with .csv, .log and .runs.jsonl beside")
    tool_files.add_overwrite_flag(p)
    a = p.parse_args()
    a.model_list = [m.strip() for m in a.models.split(",") if m.strip()]
    bad = [m for m in a.model_list if m not in MODELS]
    if bad:
        p.error(f"unknown model(s) {bad}; choose from {sorted(MODELS)}")
    for m in a.model_list:
        if a.device not in MODELS[m]["batch"]:
            p.error(f"model {m} (GPT-2 124M) runs on --device cuda only: one step on CPU cores takes minutes; "
                    "model g is the CPU's GPT")
    a.rank_list = [int(r) for r in a.ranks.split(",") if r.strip()]
    if not a.rank_list or min(a.rank_list) < 1 or a.repeats < 1:
        p.error("--ranks needs positive counts and --repeats >= 1")
    a.mode_list = [m.strip() for m in (a.modes or "eager,compile").split(",") if m.strip()]
    if any(m not in ("eager", "compile") for m in a.mode_list):
        p.error("--modes: eager and/or compile")
    try:
        a.torch_thread_configs = torch_thread_configs.parse(a.torch_threads_configs)
    except ValueError as e:
        p.error(f"--torch-threads-configs: {e}")
    return a


WRITER = "compare_torch.py --out"  # who wrote the table and the files beside it, in the output registry


def out_files(out):
    """--out and the files written beside it: (path, label) pairs for tool_files.check_outputs."""
    stem = os.path.splitext(out)[0]
    return [(out, f"--out {out}")] + [(stem + ext, f"--out: {stem + ext}") for ext in (".csv", ".log", ".runs.jsonl")]


class Log:
    """Prints to stdout and writes to the .log file beside --out (recorded as writer's)."""

    def __init__(self, path, writer):
        self.f = tool_files.open_output(path, path, writer) if path else None

    def __call__(self, text=""):
        print(text, flush=True)
        if self.f:
            self.f.write(text + "\n")
            self.f.flush()


def sh(cmd, timeout=10):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout.strip()
    except Exception:
        return ""


def pick_python(requested):
    if requested:
        return requested
    # find_spec, not an import: cheap, and enough to tell which one has torch.
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
    if os.path.exists("/usr/bin/python3") and subprocess.run(["/usr/bin/python3", "-c", probe]).returncode == 0:
        return "/usr/bin/python3"
    return "python3"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def core_count():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def gpu_name():
    if not shutil.which("nvidia-smi"):
        return ""
    names = sh(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).splitlines()
    return names[0].strip() if names else ""


_running = None  # the run in progress, for the SIGTERM handler


def run_group(cmd, env, timeout):
    """subprocess.run in a process group of its own, so that a timeout also
    ends what the command started (mpirun's ranks, PyTorch's spawned ranks)."""
    global _running
    p = _running = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err)
    finally:
        _running = None
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def on_sigterm(signum, frame):
    """Killed from outside (a stage's `timeout`): take the run's group along,
    since it sits in a session of its own that the signal does not reach."""
    if _running is not None:
        try:
            os.killpg(_running.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    sys.exit(128 + signum)


def bench_line(stdout):
    """The JSON object on the line that starts with '{' and says event bench."""
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("event") == "bench":
            return obj
    return None


def tail(text, lines=20):
    return "\n".join(text.strip().splitlines()[-lines:])


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, on_sigterm)
    started = time.monotonic()
    stem = os.path.splitext(args.out)[0] if args.out else ""
    try:
        if stem:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            tool_files.check_outputs(out_files(args.out), overwrite=args.overwrite)
        log = Log(stem + ".log" if stem else "", WRITER)
        runs_file = tool_files.open_output(stem + ".runs.jsonl", stem + ".runs.jsonl", WRITER) if stem else None
    except (OSError, tool_files.FileError) as e:
        print(f"compare_torch: {e}", file=sys.stderr)
        return 2

    python = pick_python(args.python)
    cores = core_count()
    gpu = gpu_name() if args.device == "cuda" else ""
    peak = next((v for k, v in PEAK_TFLOPS_BY_NAME.items() if k in gpu), 0.0)
    ranks = args.rank_list
    if args.device == "cuda" and ranks != [1]:
        log(f"compare_torch: CUDA runs one rank (one GPU, no MPI here); ranks {ranks} -> [1]")
        ranks = [1]
    ours_base = shlex.split(args.ours_cmd) if args.ours_cmd else [args.ddp_train]
    ours_flags = shlex.split(args.ours_flags)
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0

    def threads_for(n):
        return args.threads if args.threads > 0 else max(1, cores // n)

    header = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "gpu": gpu or "none",
        "cores": cores,
        "device": args.device,
        "precision": args.precision,
        "ours": " ".join(ours_base + ours_flags),
        "ours_git": sh(["git", "-C", ROOT, "describe", "--always", "--dirty"]),
        "python": python,
        "load average (1 min) at start": f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "",
        "command": " ".join(shlex.quote(a) for a in sys.argv),
    }
    if args.device == "cpu":
        header["threads"] = "; ".join(
            f"{n} rank(s): T = {threads_for(n)} per rank" for n in ranks) + (
            " (ours --threads T, OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = T; "
            f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'PASSIVE')} for both)")
        header["PyTorch thread configurations"] = "; ".join(
            f"{c}: {torch_thread_configs.DESCRIPTIONS[c]}" for c in args.torch_thread_configs) + (
            "; each cell the better")
    else:
        header["threads"] = "CPU threads left at defaults (GPU runs)"
    for k, v in header.items():
        log(f"# {k}: {v}")

    configs = [(m, n) for m in args.model_list for n in ranks]

    def torch_configs(n):
        """[(configuration, [names it stands for at this T])]; one unnamed
        on CUDA, where the threads stay at their defaults."""
        if args.device != "cpu":
            return [("", [])]
        return torch_thread_configs.distinct(args.torch_thread_configs, threads_for(n))

    def steps_for(m):
        w, s = STEPS[(m, args.device)]
        return args.bench_warmup or w, args.bench_steps or s

    def command(side, m, n, tconf):
        spec = MODELS[m]
        batch = spec["batch"][args.device]
        warmup, steps = steps_for(m)
        if "gpt" in spec:  # the same flag names on both sides; ours also needs its optimizer named
            common = ["--model", "gpt"] + [str(x) for k, v in spec["gpt"].items() for x in (f"--{k}", v)]
            common += [str(x) for k, v in GPT_ADAMW.items() for x in (f"--{k}", v)]
            if side == "ours":
                common += ["--optimizer", "adamw"]
        else:
            common = ["--layers", spec["layers"], "--loss", spec["loss"]]
        common += ["--batch-size", str(batch), "--device", args.device, "--bench-warmup", str(warmup),
                   "--bench-steps", str(steps)]
        if args.precision != "fp16":  # the same flag on both sides
            common += ["--precision", args.precision]
        if peak > 0:
            common += ["--peak-tflops", str(peak)]
        env = dict(os.environ)
        torch_threads = []
        if args.device == "cpu":
            t = threads_for(n)
            env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(t)
            env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            if side == "ours":
                common += ["--threads", str(t)]
            else:  # torch_reference.py sets the same variables from these flags before importing torch
                torch_t, blas_t = torch_thread_configs.threads(tconf, t)
                env["OMP_NUM_THREADS"], env["OPENBLAS_NUM_THREADS"] = str(torch_t), str(blas_t)
                torch_threads = ["--threads", str(torch_t), "--blas-threads", str(blas_t)]
        if side == "ours":
            cmd = ours_base + ["--bench"] + ours_flags + common
            if n > 1:
                mpi = ["mpirun", "-np", str(n), "--oversubscribe", "--bind-to", "none",
                       "-x", "OPENBLAS_NUM_THREADS", "-x", "OMP_NUM_THREADS", "-x", "OMP_WAIT_POLICY"]
                if is_root:
                    mpi.append("--allow-run-as-root")
                cmd = mpi + cmd
        else:
            cmd = [python, TORCH_REFERENCE, "--mode", side, "--ranks", str(n)] + common + torch_threads
        # Unbuffered Python: a run killed at its timeout still shows its output.
        env["PYTHONUNBUFFERED"] = "1"
        return cmd, env

    results = compare_torch_table.Results(args, MODELS, configs, torch_configs, threads_for, steps_for, header)
    sides = ["ours"] + args.mode_list
    total = args.repeats * sum(1 + len(args.mode_list) * len(torch_configs(n)) for _, n in configs)
    done = 0

    def write_tables():
        return results.write(args.out, stem)

    stop = False
    compile_missing = ""  # this torch has no torch.compile: one try tells, for every cell
    # Every repeat of ours and eager first, one after the other; compile after
    # them, since its first run per model spends tens of seconds compiling:
    # when the budget runs out, it is the compile cells that come up short.
    # PyTorch's thread configurations take turns going first (repeat r starts
    # at the r-th), so that neither always runs right after ours.
    def turned(items, rep):
        k = (rep - 1) % len(items)
        return items[k:] + items[:k]

    reps = range(1, args.repeats + 1)
    schedule = []
    for rep in reps:
        for m, n in configs:
            schedule.append((rep, m, n, "ours", ""))
            schedule += [(rep, m, n, "eager", c) for c, _ in turned(torch_configs(n), rep) if "eager" in sides]
    if "compile" in sides:
        schedule += [(rep, m, n, "compile", c) for rep in reps for m, n in configs
                     for c, _ in turned(torch_configs(n), rep)]
    for rep, m, n, side, tconf in schedule:
        done += 1
        earlier = results.runs[(m, n, side, tconf)]
        # Repeating an n/a (no torch.compile) or a timeout only spends the budget.
        if any(r["status"] in ("n/a", "timeout") for r in earlier):
            continue
        if side == "compile" and compile_missing:
            earlier.append({"status": "n/a", "error": compile_missing})
            continue
        cmd, env = command(side, m, n, tconf)
        remaining = args.budget_s - (time.monotonic() - started) if args.budget_s > 0 else None
        timeout = args.run_timeout if remaining is None else min(args.run_timeout, remaining)
        label = f"[{done}/{total}] repeat {rep} model {m} {args.device} ranks {n} {side}"
        if tconf:
            label += f" threads {tconf} ({torch_thread_configs.describe(tconf, threads_for(n))})"
        if remaining is not None and remaining < 5:
            stop = True
        if stop:
            earlier.append({"status": "skipped"})
            log(f"{label}: skipped (budget spent)")
            continue
        t0 = time.monotonic()
        rec = {"model": m, "ranks": n, "side": side, "repeat": rep, "cmd": " ".join(map(shlex.quote, cmd))}
        if tconf:
            rec["threads_config"] = tconf
        try:
            p = run_group(cmd, env, timeout)
            obj = bench_line(p.stdout)
            if obj is not None and "error" not in obj and p.returncode == 0:
                rec.update(status="ok", samples_per_s=obj.get("samples_per_s"), mfu=obj.get("mfu"),
                           result=obj)
                if "gpt" in MODELS[m]:
                    rec["tokens_per_s"] = obj.get("tokens_per_s")
                results.torch_version = results.torch_version or obj.get("torch", "")
            elif obj is not None and "error" in obj and side == "compile":
                rec.update(status="n/a", error=obj["error"])
                if "not available" in obj["error"]:
                    compile_missing = obj["error"]
            else:
                why = obj.get("error") if obj else f"exit status {p.returncode}, no bench line"
                rec.update(status="failed", error=why, stderr_tail=tail(p.stderr + "\n" + p.stdout))
        except subprocess.TimeoutExpired as e:
            out = (e.stderr or b"")
            out = out.decode(errors="replace") if isinstance(out, bytes) else out
            rec.update(status="timeout", error=f"no result within {timeout:.0f} s", stderr_tail=tail(out))
        except OSError as e:
            rec.update(status="failed", error=str(e))
        rec["wall_s"] = round(time.monotonic() - t0, 2)
        earlier.append(rec)
        if runs_file:
            runs_file.write(json.dumps(rec) + "\n")
            runs_file.flush()
        if rec["status"] == "ok":
            mfu = f", MFU {100 * rec['mfu']:.1f}%" if rec.get("mfu") is not None else ""
            res = rec["result"]
            # What the run's torch and BLAS said of their pools: the configuration took effect.
            blas = res.get("blas") or {}
            pools = (f"; torch {res['torch_num_threads']} thread(s), {blas.get('library', 'BLAS ?')} "
                     f"{blas.get('threads', '?')} ({blas.get('parallel', '?')})"
                     if tconf and "torch_num_threads" in res else "")
            rate = (f"{rec['tokens_per_s']:,.0f} tokens/s" if rec.get("tokens_per_s") is not None
                    else f"{rec['samples_per_s']:,.0f} samples/s")
            log(f"{label}: {rate}, step median "
                f"{res.get('step_ms_median', float('nan')):.3f} ms{mfu}{pools} ({rec['wall_s']} s)")
        else:
            log(f"{label}: {rec['status']}: {rec.get('error', '')} ({rec['wall_s']} s)")
            if rec.get("stderr_tail"):
                log("    " + rec["stderr_tail"].replace("\n", "\n    "))
            log(f"    command: {rec['cmd']}")
        write_tables()

    if hasattr(os, "getloadavg"):  # other work on the machine makes the figures noise
        header["load average (1 min) at the end"] = f"{os.getloadavg()[0]:.2f}"
    table = write_tables()
    log("")
    log(table)
    if stem:
        log(f"\ncompare_torch: wrote {args.out}, {stem}.csv, {stem}.log, {stem}.runs.jsonl "
            f"({time.monotonic() - started:.0f} s)")
    return 0


def cli():
    return main()


if __name__ == "__main__":
    sys.exit(cli())
