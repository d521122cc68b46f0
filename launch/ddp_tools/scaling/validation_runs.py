"""validation_runs.py: the runs validate_scaling_model.py compares the model with: the
settings (ZeRO stage, --zero-prefetch depth, --zero-shard-size), the two models (the MLP
and the README's GPT), the ddp_train and bench_allreduce commands, and the manifest that
lets a later --from-dir compare the same traces again without running anything.

A setting's name is z<stage>[-g<G>][-p<depth>]: z0, z1, z3-p0 (each layer's gather at its
own hook), z3-p1 (the trainer's default prefetch), z3-g2-p1 (hybrid: state sharded within
groups of 2 ranks, the gradients' 1/2 all-reduced across the N/2 groups).
"""
import json
import os
import random
import re
import subprocess

from ddp_tools.common import tool_files
from ddp_tools.scaling.scaling_model_core import ModelError

MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root"]
ALL_SETTINGS = ("z0", "z1", "z3-p0", "z3-p1", "z3-g2-p0", "z3-g2-p1")
MANIFEST = "validation.json"
# The README's GPT (launch/results/2026-12-05-cpu-zero3-prefetch.md): 4 blocks of 128 wide,
# 4 heads, context 128, bytes (vocabulary 256), AdamW, batch 16 per rank.
GPT_FLAGS = ["--model", "gpt", "--n-layer", "4", "--n-head", "4", "--n-embd", "128", "--block-size", "128",
             "--optimizer", "adamw", "--data", "text", "--val-fraction", "0.02"]
GPT_BATCH = 16
MLP_BATCH = 32


class Setting:
    def __init__(self, name, ranks):
        m = re.fullmatch(r"z([0-3])((?:-[pg]\d+)*)", name)
        parts = dict((t[0], int(t[1:])) for t in m.group(2).split("-")[1:]) if m else {}
        if not m or len(parts) != m.group(2).count("-") or parts.get("g", 1) < 1:
            raise ModelError(f"--settings {name}: expected z<stage>[-g<G>][-p<depth>], e.g. z0, z3-p1, z3-g2-p1")
        self.name, self.ranks = name, ranks
        self.zero = int(m.group(1))
        self.prefetch = parts.get("p", 1 if self.zero == 3 else 0)
        self.shard_size = parts.get("g")
        if self.shard_size is not None and self.zero == 0:
            raise ModelError(f"--settings {name}: hybrid sharding (-g) needs a ZeRO stage >= 1")

    def applies(self):
        """Hybrid groups only where they split the world into >= 2 groups."""
        g = self.shard_size
        return g is None or (1 <= g < self.ranks and self.ranks % g == 0)

    def flags(self):
        out = ["--zero", str(self.zero)]
        if self.zero == 3:
            out += ["--zero-prefetch", str(self.prefetch)]
        if self.shard_size:
            out += ["--zero-shard-size", str(self.shard_size)]
        return out

    def label(self):
        text = {0: "zero 0", 1: "zero 1", 2: "zero 2"}.get(self.zero, f"zero 3, prefetch {self.prefetch}")
        return text + (f", groups of {self.shard_size}" if self.shard_size else "")

    def key(self):
        return f"n{self.ranks}-{self.name}"


def settings(names, ranks_list):
    """The (N, setting) pairs to run, in order: every N, each setting that applies there."""
    names = list(ALL_SETTINGS) if names == "all" else [n.strip() for n in names.split(",") if n.strip()]
    out = []
    for n in ranks_list:
        for name in names:
            s = Setting(name, n)
            if s.applies():
                out.append(s)
    if not out:
        raise ModelError("--settings: none applies at these --ranks (a group -gG needs N > G, N a multiple of G)")
    return out


def write_text_file(path, size=400_000, seed=1):
    """A byte-level training text for the GPT (its content does not matter to a timing)."""
    rng = random.Random(seed)
    letters = "abcdefghij klmnopqrstuvwxyz.\n"
    with open(path, "w") as f:
        f.write("".join(rng.choice(letters) for _ in range(size)))


def model_flags(args, workdir):
    """(flags, rows per rank) of --model."""
    if args.model == "mlp":
        return ["--data", "synthetic", "--layers", args.layers], args.batch_size or MLP_BATCH
    text = args.gpt_text or os.path.join(workdir, "gpt_text.txt")
    if not args.gpt_text and not os.path.exists(text):
        write_text_file(text)
    return GPT_FLAGS + ["--train-text", text], args.batch_size or GPT_BATCH


def run(cmd, what):
    print("$ " + " ".join(cmd), flush=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    except OSError as e:
        raise ModelError(f"{what}: cannot run {cmd[0]} ({e.strerror})")
    if done.returncode != 0:
        # The program's own error line, not mpirun's banner after it.
        lines = done.stderr.strip().splitlines()
        said = [line for line in lines if ": error" in line] or lines or ["(no output)"]
        raise ModelError(f"{what} failed (status {done.returncode}): {said[-1]}")
    return done.stdout


def run_all(args, workdir, todo):
    """Runs bench_allreduce at each N (with --bench), N = 1 and every setting; writes and
    returns the manifest: {model, rows, steps, n1, runs: [{setting, ranks, trace}], tables}."""
    flags, rows = model_flags(args, workdir)
    common = ["--device", "cpu", "--threads", "1", "--batch-size", str(rows), "--steps", str(args.steps),
              "--log-every", str(args.steps), "--trace-steps", f"1:{args.steps}", "--no-prefetch"] + flags
    tables = {}
    if args.bench:
        for n in sorted({s.ranks for s in todo}):
            table = os.path.join(workdir, f"bench_np{n}.md")
            out = run(MPIRUN + ["-np", str(n), args.bench, "--markdown", "--min-bytes", "256K", "--max-bytes", "8M",
                                "--iters", "5", "--warmup", "2"], f"bench_allreduce at N = {n}")
            with open(table, "w") as f:
                f.write(out)
            tables[n] = table
    n1 = os.path.join(workdir, f"{args.model}-n1.json")
    run([args.trainer] + common + ["--trace", n1], f"ddp_train ({args.model}) at N = 1")
    runs = []
    for s in todo:
        trace = os.path.join(workdir, f"{args.model}-{s.key()}.json")
        run(MPIRUN + ["-np", str(s.ranks), args.trainer] + common + s.flags() + ["--trace", trace],
            f"ddp_train ({args.model}) at N = {s.ranks}, {s.label()}")
        runs.append({"setting": s.name, "ranks": s.ranks, "trace": os.path.basename(rank0(trace))})
    # File names relative to the manifest's directory: the directory can move.
    manifest = {"model": args.model, "rows": rows, "steps": args.steps, "n1": os.path.basename(rank0(n1)),
                "runs": runs, "tables": {str(n): os.path.basename(t) for n, t in tables.items()},
                "common_flags": common}
    with open(os.path.join(workdir, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1)
    return load_manifest(workdir)


def rank0(trace):
    return trace[:-len(".json")] + ".rank0.json"


def load_manifest(workdir):
    path = os.path.join(workdir, MANIFEST)
    try:
        m = json.loads(tool_files.read_text(path, f"--from-dir {workdir}", tool_files.SMALL_INPUT_BYTES, "JSON"))
        m["runs"] = [dict(r, setting=Setting(r["setting"], int(r["ranks"]))) for r in m["runs"]]
        m["tables"] = {int(n): t for n, t in m.get("tables", {}).items()}
        str(m["n1"])
    except tool_files.FileError as e:
        raise ModelError(str(e))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ModelError(f"--from-dir {workdir}: {MANIFEST} is not a validation manifest ({e})")
    base = os.path.dirname(path)
    m["n1"] = os.path.join(base, m["n1"])
    for r in m["runs"]:
        r["trace"] = os.path.join(base, r["trace"])
    m["tables"] = {n: os.path.join(base, t) for n, t in m["tables"].items()}
    return m
