"""trainer_rules.py: whether ddp_train would run a configuration the scaling model is
asked to project, by the trainer's own rules: `ddp_train --check-worlds N,...` (the
start-up check of a real run: ZeRO groups that divide the world, a global batch
that divides by ranks x accumulation) once per scaling mode, not a copy of them here.

The projected rows it refuses are left out of the table and said, one line each
(`N = 6 (weak) left out: ddp_train refuses it: --zero-shard-size 4 does not divide
the world of 6 ranks into groups`). Without a built ddp_train (DDP_TRAIN, else the
checkout's build/ddp_train) nothing is checked, and that is said instead.
Standard library only.
"""
import os
import subprocess

from ddp_tools.common.repo_paths import REPO


def trainer_binary():
    """The ddp_train to ask: $DDP_TRAIN, else the checkout's build/ddp_train; None if absent."""
    path = os.environ.get("DDP_TRAIN") or os.path.join(REPO, "build", "ddp_train")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def mode_flags(mode, rows, accum, zero, prefetch, shard_size):
    """The trainer's flags for one scaling mode: weak keeps one rank's micro-batch of
    `rows`, strong keeps the global batch of one rank's rows x accum."""
    flags = ["--grad-accum", str(accum), "--zero", str(zero)]
    flags += ["--batch-size", str(rows)] if mode == "weak" else ["--global-batch", str(rows * accum)]
    if zero >= 1 and shard_size:
        flags += ["--zero-shard-size", str(shard_size)]
    if zero == 3 and prefetch:
        flags += ["--zero-prefetch", str(prefetch)]
    return flags


def refusals(ranks, modes, rows, accum, zero, prefetch, shard_size):
    """({(mode, N): the trainer's reason} for the rows it refuses, [notes]). rows must be
    a whole number of samples; a fractional one (a profile's average) is not checked."""
    binary = trainer_binary()
    if binary is None:
        return {}, ["Not checked against ddp_train's rules: no build/ddp_train (launch/build.sh) and no DDP_TRAIN."]
    if rows != int(rows):
        return {}, [f"Not checked against ddp_train's rules: {rows:g} rows per micro-batch is not a whole batch."]
    refused, notes = {}, []
    worlds = ",".join(str(n) for n in ranks)
    for mode in modes:
        command = [binary, "--device", "cpu", "--threads", "1", "--data", "synthetic", "--check-worlds", worlds]
        command += mode_flags(mode, int(rows), accum, zero, prefetch, shard_size)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            return {}, [f"Not checked against ddp_train's rules: {binary} did not answer ({e})."]
        answered = False
        for line in done.stdout.splitlines():
            world, _, verdict = line.partition(": ")
            if not world.startswith("world "):
                continue
            answered = True
            if verdict.startswith("refused: "):
                refused[(mode, int(world.split()[1]))] = verdict[len("refused: "):]
        if not answered:
            # Flags it refuses at any size, or a build without --check-worlds: not checked, and said.
            reason = (done.stderr.strip().splitlines() or ["no answer"])[-1]
            return {}, [f"Not checked against ddp_train's rules: {binary} answered: {reason}"]
    notes.append("Checked against ddp_train's own rules (ddp_train --check-worlds); "
                 f"{len(refused)} projected row(s) it would refuse left out.")
    return refused, notes
