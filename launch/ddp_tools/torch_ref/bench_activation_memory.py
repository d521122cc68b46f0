"""bench_activation_memory.py: the GPT's peak activation memory per rank and
its tokens/s at each memory setting (issue 30: --recompute none|light|block x
--attention explicit|fused x --classifier-chunk off/on, and on with
--classifier-logits drop), the largest batch
that fits a memory budget at each, and tokens/s against PyTorch fp32 eager
at the binary's default settings, in one Markdown table.

Which axes there are is read from `ddp_train --help`: a flag the binary does
not have is an axis "not available" in the table (its column reads n/a, and
a target that needs it reads "not evaluable"), never a value assumed.

Ours: `ddp_train --bench --model gpt` (one rank, --threads T, AdamW as
compare_torch.py's GPT rows: launch/ddp_tools/torch_ref/compare_torch_models.py
GPT_ADAMW) at every setting and every --batches size; its one JSON line
(launch/bench/bench_report.cpp) gives peak_allocated_bytes_per_rank (the
trainer's allocation high-water mark), state_bytes_per_rank and tokens_per_s.
Activations: where the line has "activation_bytes" and
"activation_formula_bytes" (and the split by part, activation_<part>_bytes), those;
otherwise "activations and scratch (measured)" = peak - state, which also
holds the batch upload slots and the backend's GEMM scratch, and no formula
(the table says which it used).

Largest batch in --budget-gib: the peak is affine in the batch (every
activation buffer is B x T x something; the state does not depend on B), so
a line through the peaks at the first two --batches sizes gives
peak(B) = intercept + slope x B, and the largest B with peak(B) <= budget.
The fit is checked at --check-batch (one memory-only step there, at every
setting): the measured peak against the line's, within 2%.

PyTorch: launch/torch_reference.py --model gpt (torch_gpt.py's module, fp32
eager, AdamW with the same flags, its faster attention form), on the same
shape and batch (--speed-batch), in each of its CPU thread configurations
(torch_thread_configs.py), alternating with ours at the default settings
over --repeats rounds (each round's PyTorch configurations in turned order,
as compare_torch.py). Each side's figure is the median over the rounds of
its --bench line's tokens_per_s; PyTorch's is its better configuration.

Targets (issue 30): activations at the baseline (recompute none, attention
explicit, classifier unchunked) at least 4x those at block recompute, fused
attention and the chunked classifier, at T = --block-size and the largest
--batches size; ours at the default settings at least 1.5x PyTorch's
tokens/s.

Writes --out (Markdown), and beside it .runs.jsonl (every run: its command
and its raw JSON line) and .log; the table is rewritten after every run, so
a run cut short (--budget-s, Ctrl-C) leaves what finished. The three are
checked before the first run: an existing one that neither ddp_train nor one
of its tools wrote is refused (exit 2) unless --overwrite; an earlier run's
is replaced, said on stderr (launch/ddp_tools/common/tool_files.py).

Examples:
  python3 launch/bench_activation_memory.py            # the GPT-2-shaped CPU model, batches 2 and 4
  python3 launch/bench_activation_memory.py --quick --out /tmp/mem.md   # tiny shapes, seconds
"""
import argparse
import datetime
import json
import math
import os
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from ddp_tools.common import repo_paths, tool_files
from ddp_tools.torch_ref import compare_torch, torch_thread_configs
from ddp_tools.torch_ref.compare_torch import (TORCH_REFERENCE, Log, bench_line, core_count, cpu_model, on_sigterm,
                                               pick_python, run_group, sh, tail)
from ddp_tools.torch_ref.compare_torch_models import GPT_ADAMW

PROG = "bench_activation_memory"
WRITER = "bench_activation_memory.py --out"  # who wrote the table and the files beside it, in the output registry
MIB = float(1 << 20)
GIB = float(1 << 30)
FIT_TOLERANCE = 0.02  # the check batch's measured peak against the line's
MEMORY_TARGET, SPEED_TARGET = 4.0, 1.5

# The axes of the grid: (key, flag, values, the baseline's value, the target's
# value). The chunk's "on" value is --chunk-rows; "ON+drop" is that chunk
# with --classifier-logits drop (the head keeps no [B T, V] logits), where
# the binary has the flag, else it is left out and the target is "ON".
AXES = [
    ("recompute", "recompute", ["none", "light", "block"], "none", "block"),
    ("attention", "attention", ["explicit", "fused"], "explicit", "fused"),
    ("classifier_chunk", "classifier-chunk", ["0", "ON", "ON+drop"], "0", "ON+drop"),
]
DROP = "+drop"  # the classifier value's suffix for --classifier-logits drop
PARTS = ("attention", "mlp", "layernorm", "classifier", "residual")  # the JSON's activation_<part>_bytes

FULL = {"n_layer": 6, "n_head": 6, "n_embd": 384, "block_size": 1024, "vocab_size": 50304, "batches": "2,4",
        "check_batch": 3, "chunk_rows": 256, "bench_warmup": 1, "bench_steps": 2, "repeats": 3, "budget_gib": 8.0}
QUICK = {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 64, "vocab_size": 128, "batches": "2,4",
         "check_batch": 3, "chunk_rows": 32, "bench_warmup": 1, "bench_steps": 2, "repeats": 1, "budget_gib": 0.02}


class Refusal(Exception):
    """A one-line error for the user (exit status 2)."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="bench_activation_memory.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--quick", action="store_true",
                   help="tiny shapes for a test (2 layers, 2 heads, 32 wide, T 64, V 128, 1 round); "
                   "explicit flags still win")
    p.add_argument("--ddp-train", default=os.path.join(repo_paths.REPO, "build", "ddp_train"), help="our binary")
    p.add_argument("--python", default="", help="interpreter with torch (default: /usr/bin/python3 when it has torch)")
    p.add_argument("--no-torch", action="store_true", help="leave PyTorch out (its cells read 'not run')")
    shape = p.add_argument_group("model (default: the GPT-2-shaped CPU model, 6 x 384, 6 heads, T 1024, V 50304)")
    for name in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size"):
        shape.add_argument("--" + name.replace("_", "-"), type=int, default=None, help=f"default {FULL[name]}")
    g = p.add_argument_group("grid and runs")
    g.add_argument("--batches", default=None,
                   help=f"windows per rank, comma-separated; the first two fit the memory line (default {FULL['batches']})")
    g.add_argument("--check-batch", type=int, default=None,
                   help=f"a batch at which the fit is checked at every setting (0: no check; default {FULL['check_batch']})")
    g.add_argument("--speed-batch", type=int, default=0, help="the batch of the PyTorch comparison (0: the first of --batches)")
    g.add_argument("--chunk-rows", type=int, default=None,
                   help=f"--classifier-chunk ROWS for the chunked classifier's 'on' (default {FULL['chunk_rows']})")
    g.add_argument("--recompute-levels", default="none,light,block", help="the --recompute values to run, when the binary has it")
    g.add_argument("--attention-paths", default="explicit,fused", help="the --attention values to run, when the binary has it")
    g.add_argument("--bench-warmup", type=int, default=None, help=f"warm-up steps per run (default {FULL['bench_warmup']})")
    g.add_argument("--bench-steps", type=int, default=None, help=f"timed steps per run (default {FULL['bench_steps']})")
    g.add_argument("--repeats", type=int, default=None,
                   help=f"rounds of ours (default settings) against PyTorch; medians reported (default {FULL['repeats']})")
    g.add_argument("--budget-gib", type=float, default=None,
                   help=f"memory budget per rank for the largest batch, GiB of the trainer's peak (default {FULL['budget_gib']})")
    g.add_argument("--threads", type=int, default=0, help="CPU threads, T (0: the cores this process may use)")
    g.add_argument("--torch-threads-configs", default=torch_thread_configs.DEFAULT,
                   help="PyTorch's CPU thread configurations, the better reported: "
                   + "; ".join(f"{k}: {v}" for k, v in torch_thread_configs.DESCRIPTIONS.items()))
    g.add_argument("--torch-attention", choices=["auto", "explicit", "sdpa"], default="auto",
                   help="torch_reference.py --attention (auto: its faster form on this batch)")
    g.add_argument("--run-timeout", type=float, default=900.0, help="seconds per run")
    g.add_argument("--budget-s", type=float, default=0.0, help="stop starting runs after this many seconds (0: no limit)")
    p.add_argument("--note", action="append", default=[], help="a line for the table's header (repeatable)")
    p.add_argument("--out", default="",
                   help="the table (Markdown), .runs.jsonl and .log beside it (default: launch/results/"
                   "DATE-cpu-activation-memory.md; --quick: under the temporary folder)")
    tool_files.add_overwrite_flag(p)
    a = p.parse_args(argv)
    base = QUICK if a.quick else FULL
    for k, v in base.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    try:
        a.batch_list = [int(b) for b in a.batches.split(",") if b.strip()]
    except ValueError:
        p.error(f"--batches '{a.batches}': comma-separated positive integers")
    if len(a.batch_list) < 2 or min(a.batch_list) < 1 or len(set(a.batch_list[:2])) < 2:
        p.error(f"--batches '{a.batches}': at least two different positive sizes (the fit needs two points)")
    if a.speed_batch == 0:
        a.speed_batch = a.batch_list[0]
    if a.speed_batch not in a.batch_list:
        p.error(f"--speed-batch {a.speed_batch} is not one of --batches {a.batches}")
    if min(a.n_layer, a.n_head, a.n_embd, a.block_size, a.vocab_size, a.chunk_rows, a.bench_steps, a.repeats) < 1:
        p.error("the shape, --chunk-rows, --bench-steps and --repeats must be positive")
    if a.n_embd % a.n_head:
        p.error(f"--n-embd {a.n_embd} does not divide by --n-head {a.n_head}")
    if a.bench_warmup < 0 or a.check_batch < 0 or a.budget_gib <= 0 or a.threads < 0:
        p.error("--bench-warmup, --check-batch and --threads must be >= 0, --budget-gib > 0")
    try:
        a.torch_thread_configs = torch_thread_configs.parse(a.torch_threads_configs)
    except ValueError as e:
        p.error(f"--torch-threads-configs: {e}")
    a.level_list = [v.strip() for v in a.recompute_levels.split(",") if v.strip()]
    a.path_list = [v.strip() for v in a.attention_paths.split(",") if v.strip()]
    if not a.level_list or not a.path_list:
        p.error("--recompute-levels and --attention-paths need at least one value")
    if not a.out:
        day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        folder = tempfile.gettempdir() if a.quick else os.path.join(repo_paths.REPO, "launch", "results")
        a.out = os.path.join(folder, f"{day}-cpu-activation-memory{'-quick' if a.quick else ''}.md")
    if os.path.isdir(a.out) or not a.out.endswith(".md"):
        p.error(f"--out '{a.out}': a Markdown file name (.md); its .runs.jsonl and .log go beside it")
    return a


# ---- the binary's flags --------------------------------------------------------------------------

def read_help(binary):
    """The text of `binary --help`; Refusal when it is missing or fails."""
    if not os.path.exists(binary):
        raise Refusal(f"no ddp_train at {binary} (build it: cmake --build build --target ddp_train, or give --ddp-train)")
    if not os.access(binary, os.X_OK):
        raise Refusal(f"{binary} is not executable")
    try:
        p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Refusal(f"{binary} --help did not run: {e}")
    text = p.stdout + p.stderr
    if p.returncode != 0 or "--bench" not in text:
        raise Refusal(f"{binary} --help failed or lists no --bench (exit status {p.returncode}): "
                      f"{tail(text, 1)[:200]}")
    return text


def help_flags(text):
    """{flag name: its default as --help prints it ('' when none)} for
    boost::program_options' '  --name arg (=default)' rows."""
    flags = {}
    for m in re.finditer(r"^  (?:-\w \[ )?--([a-z0-9][a-z0-9-]*)(?: \])?(?: arg)?(?: \(=([^)]*)\))?", text, re.M):
        flags.setdefault(m.group(1), (m.group(2) or "").strip())
    return flags


def grid_axes(args, flags):
    """[(key, flag, values or None when the binary lacks the flag, baseline,
    target, the binary's default)]."""
    out = []
    for key, flag, values, baseline, target in AXES:
        chunk = str(args.chunk_rows)
        if key == "recompute":
            values = args.level_list
        elif key == "attention":
            values = args.path_list
        if "classifier-logits" not in flags:  # an older binary: no dropped logits
            values = [v for v in values if not v.endswith(DROP)]
            target = target.replace(DROP, "")
        values = [v.replace("ON", chunk) for v in values]
        baseline, target = (v.replace("ON", chunk) for v in (baseline, target))
        if flag not in flags:
            out.append((key, flag, None, baseline, target, None))
            continue
        default = flags[flag] or values[0]
        out.append((key, flag, values, baseline, target, default))
    return out


def settings(axes):
    """Every combination of the available axes' values, as {key: value}
    (a missing axis is left out)."""
    combos = [{}]
    for key, _, values, *_ in axes:
        if values is None:
            continue
        combos = [dict(c, **{key: v}) for c in combos for v in values]
    return combos


def setting_of(axes, which):
    """The baseline, target or default setting: {key: value} over the
    available axes ('baseline' / 'target' / 'default')."""
    idx = {"baseline": 3, "target": 4, "default": 5}[which]
    return {a[0]: a[idx] for a in axes if a[2] is not None}


def setting_key(s):
    return tuple(sorted(s.items()))


def setting_flags(axes, s):
    out = []
    for key, flag, values, *_ in axes:
        if values is None:
            continue
        value = s[key]
        if value.endswith(DROP):
            out += [f"--{flag}", value[:-len(DROP)], "--classifier-logits", "drop"]
        else:
            out += [f"--{flag}", value]
    return out


def axis_cell(axes, s, key):
    a = next(a for a in axes if a[0] == key)
    if a[2] is None:
        return "n/a"
    v = s[key]
    if key == "classifier_chunk":
        if v.endswith(DROP):
            return f"on ({v[:-len(DROP)]} rows, logits dropped)"
        return "off" if v == "0" else f"on ({v} rows)"
    return v


# ---- one run's memory ---------------------------------------------------------------------------------

def memory_of(obj):
    """The figures of one --bench line: peak, state, activations (measured),
    their formula (None when the line has none), the split by part, and
    where the activation figure comes from."""
    peak = obj.get("peak_allocated_bytes_per_rank")
    state = obj.get("state_bytes_per_rank")
    parts = {}
    for key, value in obj.items():  # activation_<part>_bytes and activation_<part>_formula_bytes
        if key.startswith("activation_") and key.endswith("_bytes") and not key.endswith("_formula_bytes"):
            part = key[len("activation_"):-len("_bytes")]
            if part:
                parts[part] = {"bytes": value, "formula_bytes": obj.get(f"activation_{part}_formula_bytes")}
    m = {"peak": peak, "state": state, "parts": parts}
    if obj.get("activation_bytes") is not None:
        m.update(act=obj["activation_bytes"], formula=obj.get("activation_formula_bytes"), source="split")
    else:
        m.update(act=(peak - state) if peak is not None and state is not None else None, formula=None,
                 source="peak - state")
    return m


def mib(v):
    return "n/a" if v is None else f"{v / MIB:.2f}"


def fit_line(points):
    """(intercept, slope) of the line through the first two (batch, bytes)."""
    (b1, m1), (b2, m2) = points[:2]
    slope = (m2 - m1) / (b2 - b1)
    return m1 - slope * b1, slope


def largest_batch(intercept, slope, budget):
    """The largest B >= 1 with intercept + slope B <= budget; 0 when none
    fits; None when the slope is not positive (no limit from this fit)."""
    if slope <= 0:
        return None
    return max(0, math.floor((budget - intercept) / slope))


# ---- the runs -------------------------------------------------------------------------------------------

class Bench:
    def __init__(self, args, help_text):
        self.args = args
        self.started = time.monotonic()
        self.stem = os.path.splitext(args.out)[0]
        os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)
        beside = (self.stem + ".runs.jsonl", self.stem + ".log")
        tool_files.check_outputs([(args.out, f"--out {args.out}")] + [(p, f"--out: {p}") for p in beside],
                                 overwrite=args.overwrite)
        self.log = Log(self.stem + ".log", WRITER)
        self.runs_file = tool_files.open_output(self.stem + ".runs.jsonl", self.stem + ".runs.jsonl", WRITER)
        self.cores = core_count()
        self.threads = args.threads or self.cores
        self.help_text = help_text
        self.flags = help_flags(self.help_text)
        self.axes = grid_axes(args, self.flags)
        self.grid = settings(self.axes)
        self.baseline, self.target, self.default = (setting_of(self.axes, w) for w in ("baseline", "target", "default"))
        for name, s in (("baseline", self.baseline), ("target", self.target), ("default", self.default)):
            if setting_key(s) not in {setting_key(g) for g in self.grid}:
                self.grid.append(s)  # e.g. a default outside --recompute-levels
                self.log(f"{PROG}: the {name} setting {s} added to the grid")
        self.python = pick_python(args.python)
        self.torch_why = ""
        if args.no_torch:
            self.torch_why = "not run (--no-torch)"
        else:
            probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
            try:
                if subprocess.run([self.python, "-c", probe], timeout=60).returncode != 0:
                    self.torch_why = f"not run: {self.python} has no torch"
            except (OSError, subprocess.TimeoutExpired) as e:
                self.torch_why = f"not run: {self.python} did not start ({e})"
        self.tconfs = ([] if self.torch_why else
                       torch_thread_configs.distinct(args.torch_thread_configs, self.threads))
        self.ours = {}   # (setting key, batch) -> [records]
        self.torch = {}  # configuration -> [records]
        self.commands = []
        self.torch_version = ""
        self.torch_attention = ""
        self.header = self.make_header()

    def make_header(self):
        a = self.args
        present = [f"--{f}" for _, f, v, *_ in self.axes if v is not None]
        missing = [f"--{f}" for _, f, v, *_ in self.axes if v is None]
        return {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "host": socket.gethostname(),
            "cpu": cpu_model(),
            "cores (nproc)": self.cores,
            "load average (1 min) at start": f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "",
            "ours": a.ddp_train,
            "ours_git": sh(["git", "-C", repo_paths.REPO, "describe", "--always", "--dirty"]),
            "model": (f"GPT {a.n_layer} layers x {a.n_embd} wide, {a.n_head} heads, T {a.block_size}, "
                      f"V {a.vocab_size}; batches {a.batch_list} windows per rank, 1 rank"),
            "axes in this binary": ", ".join(present) or "none",
            "axes not available (the binary's --help has no such flag)": ", ".join(missing) or "none",
            "threads": (f"ours --threads {self.threads}, OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = {self.threads}; "
                        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'PASSIVE')} for both"),
            "optimizer (both sides)": "AdamW " + ", ".join(f"{k} {v}" for k, v in GPT_ADAMW.items())
                                      + " (decay on tensors of rank >= 2)",
            "steps per run": (f"{a.bench_warmup} warm-up, {a.bench_steps} timed; the check batch "
                              f"{a.check_batch or 'none'}: 0 warm-up, 1 timed (memory only)"),
            "PyTorch": self.torch_why or (
                f"{self.python} {TORCH_REFERENCE} --model gpt, fp32 eager, --attention {a.torch_attention}, "
                f"batch {a.speed_batch}; thread configurations: "
                + "; ".join(f"{c}: {torch_thread_configs.describe(c, self.threads)}" for c, _ in self.tconfs)),
            "command": " ".join(shlex.quote(x) for x in [sys.argv[0]] + sys.argv[1:]),
            **{f"note {i}" if len(a.note) > 1 else "note": text for i, text in enumerate(a.note, 1)},
        }

    def env(self, torch_t=None, blas_t=None):
        e = dict(os.environ)
        e["OMP_NUM_THREADS"] = str(torch_t if torch_t is not None else self.threads)
        e["OPENBLAS_NUM_THREADS"] = str(blas_t if blas_t is not None else self.threads)
        e.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        e["PYTHONUNBUFFERED"] = "1"
        return e

    def shape_flags(self, batch, warmup, steps):
        a = self.args
        f = ["--model", "gpt", "--n-layer", a.n_layer, "--n-head", a.n_head, "--n-embd", a.n_embd,
             "--block-size", a.block_size, "--vocab-size", a.vocab_size]
        f += [x for k, v in GPT_ADAMW.items() for x in (f"--{k}", v)]
        f += ["--batch-size", batch, "--device", "cpu", "--bench-warmup", warmup, "--bench-steps", steps]
        return [str(x) for x in f]

    def ours_cmd(self, s, batch, memory_only):
        w, n = (0, 1) if memory_only else (self.args.bench_warmup, self.args.bench_steps)
        return ([self.args.ddp_train, "--bench"] + self.shape_flags(batch, w, n)
                + ["--optimizer", "adamw", "--threads", str(self.threads)] + setting_flags(self.axes, s))

    def torch_cmd(self, tconf):
        torch_t, blas_t = torch_thread_configs.threads(tconf, self.threads)
        a = self.args
        cmd = ([self.python, TORCH_REFERENCE, "--mode", "eager", "--ranks", "1"]
               + self.shape_flags(a.speed_batch, a.bench_warmup, a.bench_steps)
               + ["--attention", a.torch_attention, "--threads", str(torch_t), "--blas-threads", str(blas_t)])
        return cmd, self.env(torch_t, blas_t)

    def schedule(self):
        """[(label kind, payload)]: round 1 (ours at the default settings at
        the speed batch, then each PyTorch configuration), the rest of the
        grid, the check batch at every setting, then rounds 2.. ."""
        a = self.args
        d = self.default
        rounds = []
        for rep in range(1, a.repeats + 1):
            k = (rep - 1) % max(1, len(self.tconfs))
            turned = self.tconfs[k:] + self.tconfs[:k]
            rounds.append([("ours", (d, a.speed_batch, False, rep))] + [("torch", (c, rep)) for c, _ in turned])
        grid = [("ours", (s, b, False, 1)) for s in self.grid for b in a.batch_list
                if not (setting_key(s) == setting_key(d) and b == a.speed_batch)]
        check = ([("ours", (s, a.check_batch, True, 1)) for s in self.grid]
                 if a.check_batch and a.check_batch not in a.batch_list else [])
        return rounds[0] + grid + check + [job for r in rounds[1:] for job in r]

    def run_one(self, cmd, env):
        """(record fields, the JSON line or None)."""
        remaining = self.args.budget_s - (time.monotonic() - self.started) if self.args.budget_s > 0 else None
        timeout = self.args.run_timeout if remaining is None else min(self.args.run_timeout, remaining)
        rec = {"cmd": " ".join(map(shlex.quote, cmd))}
        if rec["cmd"] not in self.commands:
            self.commands.append(rec["cmd"])
        t0 = time.monotonic()
        obj = None
        try:
            p = run_group(cmd, env, timeout)
            obj = bench_line(p.stdout)
            if obj is not None and "error" not in obj and p.returncode == 0:
                rec["status"] = "ok"
            else:
                why = obj.get("error") if obj else f"exit status {p.returncode}, no bench line"
                rec.update(status="failed", error=why, stderr_tail=tail(p.stderr + "\n" + p.stdout))
                obj = None
        except subprocess.TimeoutExpired as e:
            out = e.stderr or b""
            out = out.decode(errors="replace") if isinstance(out, bytes) else out
            rec.update(status="timeout", error=f"no result within {timeout:.0f} s", stderr_tail=tail(out))
        except OSError as e:
            rec.update(status="failed", error=str(e))
        rec["wall_s"] = round(time.monotonic() - t0, 2)
        if obj is not None:
            rec["result"] = obj
        return rec, obj

    def run(self):
        for k, v in self.header.items():
            self.log(f"# {k}: {v}")
        jobs = self.schedule()
        for i, (side, job) in enumerate(jobs, 1):
            spent = self.args.budget_s > 0 and time.monotonic() - self.started > self.args.budget_s - 5
            if side == "ours":
                s, batch, memory_only, rep = job
                label = (f"[{i}/{len(jobs)}] ours " + " ".join(f"{k}={v}" for k, v in s.items())
                         + f" batch {batch}" + (" (memory only)" if memory_only else f" round {rep}"))
                runs = self.ours.setdefault((setting_key(s), batch), [])
                if spent:
                    runs.append({"status": "skipped"})
                    self.log(f"{label}: skipped (budget spent)")
                    continue
                rec, obj = self.run_one(self.ours_cmd(s, batch, memory_only), self.env())
                rec.update(side="ours", setting=s, batch=batch, memory_only=memory_only, round=rep)
                runs.append(rec)
                if obj is not None:
                    m = memory_of(obj)
                    rec["memory"] = m
                    rate = "" if memory_only else f"{obj.get('tokens_per_s', float('nan')):,.0f} tokens/s, "
                    self.log(f"{label}: {rate}peak {mib(m['peak'])} MiB, state {mib(m['state'])} MiB, "
                             f"activations {mib(m['act'])} MiB ({m['source']}) ({rec['wall_s']} s)")
            else:
                tconf, rep = job
                label = f"[{i}/{len(jobs)}] PyTorch eager {tconf} ({torch_thread_configs.describe(tconf, self.threads)}) round {rep}"
                runs = self.torch.setdefault(tconf, [])
                if spent:
                    runs.append({"status": "skipped"})
                    self.log(f"{label}: skipped (budget spent)")
                    continue
                cmd, env = self.torch_cmd(tconf)
                rec, obj = self.run_one(cmd, env)
                rec.update(side="torch", threads_config=tconf, batch=self.args.speed_batch, round=rep)
                runs.append(rec)
                if obj is not None:
                    self.torch_version = self.torch_version or obj.get("torch", "")
                    self.torch_attention = self.torch_attention or obj.get("attention", "")
                    self.log(f"{label}: {obj.get('tokens_per_s', float('nan')):,.0f} tokens/s, attention "
                             f"{obj.get('attention', '?')} ({rec['wall_s']} s)")
            if rec["status"] != "ok":
                self.log(f"{label}: {rec['status']}: {rec.get('error', '')} ({rec['wall_s']} s)")
                if rec.get("stderr_tail"):
                    self.log("    " + rec["stderr_tail"].replace("\n", "\n    "))
                self.log(f"    command: {rec['cmd']}")
            self.runs_file.write(json.dumps(rec) + "\n")
            self.runs_file.flush()
            self.write()
        if hasattr(os, "getloadavg"):
            self.header["load average (1 min) at the end"] = f"{os.getloadavg()[0]:.2f}"
        text = self.write()
        self.log("")
        self.log(text)
        self.log(f"\n{PROG}: wrote {self.args.out}, {self.stem}.runs.jsonl, {self.stem}.log "
                 f"({time.monotonic() - self.started:.0f} s)")
        return 0

    # ---- results ------------------------------------------------------------------------------------

    def ok(self, runs):
        return [r for r in runs if r.get("status") == "ok"]

    def memory(self, s, batch):
        """The cell's memory (the first ok run's; every run of a setting and
        batch allocates the same), or None."""
        ok = self.ok(self.ours.get((setting_key(s), batch), []))
        return ok[0]["memory"] if ok else None

    def status(self, runs):
        for st in ("timeout", "failed", "skipped"):
            if any(r.get("status") == st for r in runs):
                return st
        return "not run"

    def ours_rate(self, s, batch):
        """(median tokens/s over the timed runs, how many) or (None, status)."""
        runs = self.ours.get((setting_key(s), batch), [])
        ok = [r for r in self.ok(runs) if not r["memory_only"]]
        if not ok:
            return None, self.status(runs)
        return statistics.median(r["result"]["tokens_per_s"] for r in ok), len(ok)

    def torch_rate(self):
        """(best configuration, its median, {configuration: median or status})."""
        medians, shown = {}, {}
        for c, aliases in self.tconfs:
            ok = self.ok(self.torch.get(c, []))
            medians[c] = statistics.median(r["result"]["tokens_per_s"] for r in ok) if ok else None
            shown[" = ".join([c] + aliases)] = (f"{medians[c]:,.0f} (n={len(ok)})" if ok
                                                else self.status(self.torch.get(c, [])))
        name, v = torch_thread_configs.best(medians)
        return name, v, shown

    def fit(self, s):
        """The fit of one setting: {intercept, slope, largest, check...} or None."""
        a = self.args
        pts = [(b, self.memory(s, b)) for b in a.batch_list[:2]]
        if any(m is None or m["peak"] is None for _, m in pts):
            return None
        intercept, slope = fit_line([(b, m["peak"]) for b, m in pts])
        act_i, act_s = fit_line([(b, m["act"]) for b, m in pts])
        budget = a.budget_gib * GIB
        f = {"intercept": intercept, "slope": slope, "largest": largest_batch(intercept, slope, budget),
             "act_intercept": act_i, "act_slope": act_s, "check": None}
        checks = [b for b in a.batch_list[2:]] + ([a.check_batch] if a.check_batch else [])
        for b in checks:
            m = self.memory(s, b)
            if m is None:
                continue
            pred = intercept + slope * b
            err = (m["peak"] - pred) / pred if pred else float("inf")
            f["check"] = {"batch": b, "measured": m["peak"], "predicted": pred, "error": err,
                          "ok": abs(err) <= FIT_TOLERANCE}
            break
        return f

    def targets(self):
        """[(target, figure text, PASS/FAIL/not evaluable)]."""
        a = self.args
        out = []
        big = max(a.batch_list[:2])
        missing = [f"--{f}" for _, f, v, *_ in self.axes if v is None]
        base, tgt = self.memory(self.baseline, big), self.memory(self.target, big)
        what = (f">= {MEMORY_TARGET:g}x less activation memory at T {a.block_size}, batch {big}: baseline ("
                + self.setting_text(self.baseline) + ") against fused attention, chunked classifier, block recompute")
        ratio = base["act"] / tgt["act"] if base and tgt and base["act"] and tgt["act"] else None
        if missing:
            partial = (f"with the axes there are ({self.setting_text(self.target)}): {ratio:.2f}x" if ratio is not None
                       else "no figure")
            out.append((what, partial, f"not evaluable ({', '.join(missing)} not in this binary)"))
        elif ratio is None:
            out.append((what, "no figure", "not evaluable (a run failed or was not run)"))
        else:
            out.append((what, f"{mib(base['act'])} / {mib(tgt['act'])} MiB = {ratio:.2f}x",
                        "PASS" if ratio >= MEMORY_TARGET else "FAIL"))
        ours, n = self.ours_rate(self.default, a.speed_batch)
        name, theirs, _ = self.torch_rate()
        what = (f">= {SPEED_TARGET:g}x PyTorch fp32 eager tokens/s at the default settings ("
                + self.setting_text(self.default) + f"), batch {a.speed_batch}")
        if ours is None or theirs is None:
            why = self.torch_why or "a run failed or was not run"
            out.append((what, "no figure", f"not evaluable ({why})"))
        else:
            ratio = ours / theirs
            out.append((what, f"{ours:,.0f} / {theirs:,.0f} ({name}) = {ratio:.2f}x",
                        "PASS" if ratio >= SPEED_TARGET else "FAIL"))
        return out

    def setting_text(self, s):
        parts = [f"{f} {s[k]}" for k, f, v, *_ in self.axes if v is not None]
        return ", ".join(parts) or "no axis"

    def tables(self):
        a = self.args
        axes_cols = ["recompute", "attention", "classifier"]
        any_formula = any(r.get("memory", {}).get("formula") is not None
                          for runs in self.ours.values() for r in self.ok(runs))
        lines = ["| " + " | ".join(axes_cols) + " | batch | peak allocated MiB | state MiB | "
                 "activations MiB (measured) | activations MiB (formula) | tokens/s |",
                 "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        batches = list(a.batch_list) + ([a.check_batch] if a.check_batch and a.check_batch not in a.batch_list else [])
        for s in self.grid:
            for b in batches:
                if (setting_key(s), b) not in self.ours:
                    continue
                m = self.memory(s, b)
                rate, n = self.ours_rate(s, b)
                memory_only = b == a.check_batch and b not in a.batch_list
                if m is None:
                    st = self.status(self.ours[(setting_key(s), b)])
                    mem = [st, "", "", ""]
                else:
                    tag = "" if m["source"] == "split" else " *"
                    mem = [mib(m["peak"]), mib(m["state"]), mib(m["act"]) + tag, mib(m["formula"])]
                rate_cell = ("(memory only)" if memory_only else
                             f"{rate:,.0f}" + (f" (n={n})" if n > 1 else "") if rate is not None else str(n))
                lines.append("| " + " | ".join(axis_cell(self.axes, s, k) for k, *_ in AXES)
                             + f" | {b} | " + " | ".join(mem) + f" | {rate_cell} |")
        main = "\n".join(lines)

        budget = a.budget_gib
        fl = [f"| recompute | attention | classifier | peak MiB = intercept + slope x B | check: measured / line "
              f"at B | largest batch in {budget:g} GiB | activations MiB = intercept + slope x B |",
              "| --- | --- | --- | --- | --- | ---: | --- |"]
        for s in self.grid:
            f = self.fit(s)
            cells = [axis_cell(self.axes, s, k) for k, *_ in AXES]
            if f is None:
                fl.append("| " + " | ".join(cells) + " | no fit (a batch's run is missing) | | | |")
                continue
            c = f["check"]
            check = ("not checked" if c is None else
                     f"{mib(c['measured'])} / {mib(c['predicted'])} at B {c['batch']} "
                     f"({100 * c['error']:+.2f}%, {'ok' if c['ok'] else 'OFF THE LINE'})")
            largest = "no limit (slope <= 0)" if f["largest"] is None else str(f["largest"])
            fl.append("| " + " | ".join(cells) + f" | {f['intercept'] / MIB:.1f} + {f['slope'] / MIB:.2f} x B | {check} "
                      f"| {largest} | {f['act_intercept'] / MIB:.1f} + {f['act_slope'] / MIB:.2f} x B |")
        fits = "\n".join(fl)

        parts_table = ""
        big = max(a.batch_list[:2])
        if any(self.memory(s, big) and self.memory(s, big)["parts"] for s in self.grid):
            pl = ["| recompute | attention | classifier | " + " | ".join(f"{p} MiB (formula)" for p in PARTS) + " |",
                  "| --- | --- | --- | " + " | ".join("---:" for _ in PARTS) + " |"]
            for s in self.grid:
                m = self.memory(s, big)
                if not m or not m["parts"]:
                    continue
                cells = []
                for p in PARTS:
                    d = m["parts"].get(p) or {}
                    cells.append(f"{mib(d.get('bytes'))} ({mib(d.get('formula_bytes'))})" if d else "n/a")
                pl.append("| " + " | ".join(axis_cell(self.axes, s, k) for k, *_ in AXES) + " | " + " | ".join(cells) + " |")
            parts_table = f"Activations by part at batch {big} (measured, formula in brackets):\n\n" + "\n".join(pl)

        ours, n = self.ours_rate(self.default, a.speed_batch)
        name, theirs, shown = self.torch_rate()
        speed = ["| side | setting | batch | tokens/s (median) | notes |", "| --- | --- | ---: | ---: | --- |"]
        speed.append(f"| ours | {self.setting_text(self.default)} (the binary's defaults) | {a.speed_batch} | "
                     + (f"{ours:,.0f} (n={n})" if ours is not None else str(n)) + " | AdamW, FP16 storage, FP32 GEMMs |")
        if self.torch_why:
            speed.append(f"| PyTorch fp32 eager | | {a.speed_batch} | | {self.torch_why} |")
        else:
            configs = "; ".join(f"{k}: {v}" for k, v in shown.items())
            speed.append(f"| PyTorch fp32 eager | attention {self.torch_attention or '?'} | {a.speed_batch} | "
                         + (f"{theirs:,.0f} ({name})" if theirs is not None else "no figure")
                         + f" | best of {configs} |")
            if ours is not None and theirs is not None:
                speed.append(f"| ours / PyTorch | | | {ours / theirs:.2f} | |")
        speed = "\n".join(speed)

        tl = ["| target | figure | result |", "| --- | --- | --- |"]
        tl += [f"| {t} | {fig} | {res} |" for t, fig, res in self.targets()]
        return main, any_formula, fits, parts_table, speed, "\n".join(tl)

    def write(self):
        a = self.args
        main, any_formula, fits, parts_table, speed, targets = self.tables()
        notes = [f"# GPT activation memory and speed, cpu ({a.n_layer} x {a.n_embd}, {a.n_head} heads, "
                 f"T {a.block_size}, V {a.vocab_size})", ""]
        notes += [f"- {k}: {v}" for k, v in self.header.items()]
        if self.torch_version:
            notes.append(f"- torch: {self.torch_version}")
        act_note = ("activations from the --bench line's activation_bytes (the trainer's split) and "
                    "activation_formula_bytes" if any_formula else "")
        notes.append("- memory: the --bench line's peak_allocated_bytes_per_rank (the trainer's allocation "
                     "high-water mark, every Buffer and the CPU GEMM scratch) and state_bytes_per_rank; "
                     + (act_note + "; " if act_note else "")
                     + "* = activations and scratch (measured): peak - state, the --bench line has no "
                     "activation split (it also holds the batch slots and the GEMM scratch); "
                     "formula n/a where the line gives none")
        notes.append(f"- memory is affine in the batch: the line through the peaks at batches "
                     f"{a.batch_list[0]} and {a.batch_list[1]}, checked at "
                     + (f"batch {a.check_batch}" if a.check_batch else "no third batch")
                     + f" (within {100 * FIT_TOLERANCE:g}%); largest batch = the largest B with the line <= "
                     f"{a.budget_gib:g} GiB")
        notes.append("- tokens/s: each --bench line's tokens_per_s (ours: the timed steps' mean; PyTorch: its "
                     "median step); (n=k): median of k runs; the default setting's runs alternate with "
                     "PyTorch's, round by round")
        text = ("\n".join(notes) + "\n\n## Memory and tokens/s by setting\n\n" + main
                + "\n\n## Largest batch in the budget\n\n" + fits
                + ("\n\n" + parts_table if parts_table else "")
                + "\n\n## Ours against PyTorch\n\n" + speed
                + "\n\n## Targets (issue 30)\n\n" + targets
                + "\n\n## Commands\n\n```\n" + "\n".join(self.commands) + "\n```\n")
        tool_files.write_text_atomic(a.out, f"--out {a.out}", text, WRITER)
        return text


def main(argv=None):
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        help_text = read_help(args.ddp_train)  # before anything is written
    except Refusal as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    try:
        bench = Bench(args, help_text)
    except tool_files.FileError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{PROG}: cannot write beside {args.out}: {e}", file=sys.stderr)
        return 2
    try:
        return bench.run()
    except KeyboardInterrupt:
        if compare_torch._running is not None:  # its own session: Ctrl-C did not reach it
            try:
                os.killpg(compare_torch._running.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        print(f"{PROG}: interrupted; {args.out} holds what finished", file=sys.stderr)
        return 130


def cli():
    return main()


if __name__ == "__main__":
    sys.exit(cli())
