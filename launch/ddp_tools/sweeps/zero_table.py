"""The --zero benchmark table: state bytes per rank (measured against the
ZeRO paper's formula and ours), step time, the trainer's allocation peak and
the bytes sent per step per rank (a ring algorithm's, from the collectives'
sizes) against theory, for every stage at several world sizes.

Runs `ddp_train --bench` under mpirun for each (model, ranks, stage) and
prints a Markdown table (also written to --out). CPU ranks by default; run
it on an idle machine: the step times are wall-clock medians.

  launch/zero_table.py --ranks 1,2,4 --out launch/results/zero.md

Bad flags and an --out that cannot be written (a missing directory, an
existing file that neither ddp_train nor one of its tools wrote, unless
--overwrite) are refused before the first run.
"""
import argparse
import json
import os
import subprocess
import sys

from ddp_tools.common import tool_files

MODELS = {
    # compare_torch's model a: the wide MLP that fits 2 CPU cores at 4 ranks
    "mlp": ["--layers", "784,1024,1024,10", "--batch-size", "64"],
    # the README's GPT (compare_torch's g)
    "gpt": ["--model", "gpt", "--n-layer", "4", "--n-head", "4", "--n-embd", "128", "--block-size", "128",
            "--vocab-size", "256", "--batch-size", "4"],
}


HEADER = ("| model | ranks | stage | state MiB/rank | formula (paper / ours) MiB | measured / ours "
          "| peak alloc MiB/rank | step ms (median) | sent MiB/step/rank | theory MiB | sent / theory |")


def formula(stage, world, params, adamw):
    """Bytes per rank: the paper's (2 + 2 + K) split by stage, and ours (+ FP32 gradient, decay mask)."""
    k = 4.0 + (8.0 if adamw else 4.0)
    weights = 2.0 / world if stage >= 3 else 2.0
    grads = 2.0 / world if stage >= 2 else 2.0
    state = k / world if stage >= 1 else k
    extras = (4.0 + (1.0 if adamw else 0.0)) / (world if stage >= 1 else 1)
    paper = (weights + grads + state) * params
    return paper, paper + extras * params


def run(binary, model, ranks, stage, warmup, steps, device):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
    cmd = ["mpiexec", "-n", str(ranks), "--oversubscribe", binary, "--device", device, "--bench", "--optimizer", "adamw",
           "--zero", str(stage), "--bench-warmup", str(warmup), "--bench-steps", str(steps)] + MODELS[model]
    if device == "cpu":
        cmd += ["--threads", "1"]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    except OSError as e:
        sys.exit(f"zero_table: cannot run {cmd[0]} ({e.strerror}): is MPI installed?")
    if out.returncode != 0:
        # ddp_train's own error line, not the mpiexec banner after it.
        lines = out.stderr.strip().splitlines()
        errors = [line for line in lines if line.startswith("ddp_train: error")]
        said = errors[0] if errors else (lines[-1] if lines else "(no output)")
        sys.exit(f"zero_table: {' '.join(cmd)} failed ({out.returncode}): {said}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def int_list(text, flag, low, high=None):
    """The comma-separated integers of a flag, each from low (to high); argparse's error otherwise."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{flag} {text}: expected comma-separated integers") from None
    if any(v < low or (high is not None and v > high) for v in values):
        span = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise argparse.ArgumentTypeError(f"{flag} {text}: each must be {span}")
    return values


def check_args(ap, a):
    """Refuses bad flags before the first run: one line (argparse's), exit status 2."""
    try:
        a.ranks = int_list(a.ranks, "--ranks", 1)
        a.stages = int_list(a.stages, "--stages", 0, 3)
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))
    a.models = a.models.split(",")
    unknown = [m for m in a.models if m not in MODELS]
    if unknown:
        ap.error(f"--models {','.join(unknown)}: not one of {','.join(MODELS)}")
    if a.steps < 1 or a.warmup < 0:
        ap.error(f"--steps {a.steps} --warmup {a.warmup}: expected steps >= 1 and warmup >= 0")
    if not (os.path.isfile(a.binary) and os.access(a.binary, os.X_OK)):
        ap.error(f"--binary {a.binary}: not an executable file (build it: launch/build.sh)")
    if a.out:
        try:
            tool_files.check_outputs([(a.out, f"--out {a.out}")], [a.binary], a.overwrite)
        except tool_files.FileError as e:
            ap.error(str(e))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="build/ddp_train")
    ap.add_argument("--models", default="mlp,gpt")
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--stages", default="0,1,2,3")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--out", default="", help="also write the table here (Markdown)")
    tool_files.add_overwrite_flag(ap)
    a = ap.parse_args()
    check_args(ap, a)
    lines = [HEADER, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    mib = 1 << 20
    for model in a.models:
        for ranks in a.ranks:
            for stage in a.stages:
                r = run(a.binary, model, ranks, stage, a.warmup, a.steps, a.device)
                paper, ours = formula(stage, ranks, r["parameters"], True)
                theory = r["comm_bytes_theory"]
                ratio = f"{r['comm_bytes_per_step_per_rank'] / theory:.3f}" if theory > 0 else "-"
                lines.append(
                    f"| {model} ({r['parameters']:,} parameters) | {ranks} | {stage} | {r['state_bytes_per_rank'] / mib:.3f} | "
                    f"{paper / mib:.3f} / {ours / mib:.3f} | {r['state_bytes_per_rank'] / ours:.4f} | "
                    f"{r['peak_allocated_bytes_per_rank'] / mib:.2f} | {r['step_ms_median']:.1f} | "
                    f"{r['comm_bytes_per_step_per_rank'] / mib:.3f} | {theory / mib:.3f} | {ratio} |")
                print(lines[-1], flush=True)
    if a.out:
        try:
            tool_files.write_text_atomic(a.out, f"--out {a.out}", "\n".join(lines) + "\n", "zero_table.py --out")
        except tool_files.FileError as e:
            sys.exit(f"zero_table: {e}")


def cli():
    main()


if __name__ == "__main__":
    sys.exit(cli())
