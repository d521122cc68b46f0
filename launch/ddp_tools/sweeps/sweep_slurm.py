"""sweep_slurm.py: scaling_sweep.py's --slurm path, one Slurm job per point.

Each point becomes a small batch script in --out-dir (job-<stem>.sbatch) that
runs `srun --mpi=pmix ddp_train <the same arguments as the mpirun path>`,
submitted with `sbatch --wait`, so the sweep runs its points one after the
other as it does under mpirun, and reads the same metrics files. The job's
stdout/stderr go to the same log-<stem>.out/.err as an mpirun run's; sbatch's
own messages (the job id, a refusal) to log-<stem>.sbatch. The script and
the sbatch log are written through tool_files (checked by scaling_sweep.py
first, recorded as the sweep's).

Standard library only; imported by scaling_sweep.py.
"""

import os
import shlex
import signal
import subprocess
import time

from ddp_tools.common import tool_files

WRITER = "scaling_sweep.py --out-dir"  # who wrote the script and the sbatch log, in the output registry

class SubmitFailed(Exception):
    pass


def quote_command(argv):
    return " ".join(shlex.quote(a) for a in argv)


def parse_slurm_args(text):
    """--slurm-args as a list (shell words), or raises ValueError."""
    return shlex.split(text or "")


def srun_command(args, trainer_cmd):
    """The job's launch line: srun starts N tasks that MPI sees as one world through PMI(x)."""
    cmd = ["srun", "--mpi=" + args.slurm_mpi, "--kill-on-bad-exit=1"]
    # Open MPI's --bind-to has an srun counterpart; 'default' leaves the site's policy.
    binding = {"none": "none", "core": "cores", "socket": "sockets"}.get(args.bind_to)
    if binding:
        cmd.append("--cpu-bind=" + binding)
    return cmd + trainer_cmd


def sbatch_command(args, n, stem, log_base, script_path):
    """sbatch --wait for one point; --slurm-args come last, so they override ours."""
    cmd = list(args.sbatch_launcher) + ["--wait", "--parsable", "--job-name=sweep-" + stem,
                                        "--output=" + log_base + ".out", "--error=" + log_base + ".err"]
    if args.device == "cuda":
        # One rank per GPU; every task on a node sees all the node's GPUs, since
        # ddp_train picks GPU <local rank> itself (no --gpus-per-task: Slurm
        # would then show each task only its own GPU).
        per_node = min(n, args.gpus_per_node)
        nodes = (n + per_node - 1) // per_node
        cmd += ["--nodes=%d" % nodes, "--ntasks=%d" % n, "--ntasks-per-node=%d" % per_node,
                "--gpus-per-node=%d" % per_node]
    else:
        cmd += ["--ntasks=%d" % n]
    return cmd + args.slurm_extra + [script_path]


def job_script(stem, srun_cmd):
    return "\n".join([
        "#!/bin/bash",
        "# Written by scaling_sweep.py --slurm for the point %s; sbatch's options are on its command line." % stem,
        'echo "scaling_sweep: Slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, $SLURM_NTASKS tasks"',
        "# ddp_train sets its own BLAS thread count (--threads; 0: cores / local ranks).",
        "export OPENBLAS_NUM_THREADS=1",
        "exec " + quote_command(srun_cmd),
        "",
    ])


def read_job_id(path):
    """The job id sbatch --parsable printed (first line, 'id' or 'id;cluster'), or None."""
    try:
        with open(path, errors="replace") as f:
            for line in f:
                head = line.strip().split(";")[0]
                if head.isdigit():
                    return head
    except OSError:
        pass
    return None


def sbatch_messages(path, limit=5):
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip() for l in f if l.strip() and not l.strip().split(";")[0].isdigit()]
    except OSError:
        return ""
    return "; ".join(lines[-limit:])


def cancel(job_id, env):
    if job_id:
        subprocess.run(["scancel", job_id], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=60, check=False)


def submit(sbatch_cmd, script_path, script_text, env, log_base, timeout):
    """Writes the job script, runs sbatch --wait; returns the elapsed seconds or raises SubmitFailed.

    On a timeout or Ctrl-C the job is cancelled (scancel), not just the waiting sbatch."""
    for suffix in (".out", ".err"):
        if os.path.exists(log_base + suffix):
            os.remove(log_base + suffix)  # the tail shown on failure must be this job's
    try:
        tool_files.write_text_atomic(script_path, "the job script %s" % script_path, script_text, WRITER)
        os.chmod(script_path, 0o755)
    except tool_files.FileError as e:
        raise SubmitFailed(str(e))
    except OSError as e:
        raise SubmitFailed("cannot write the job script %s (%s)" % (script_path, e.strerror))
    sbatch_log = log_base + ".sbatch"
    start = time.time()
    try:
        log = tool_files.open_output(sbatch_log, sbatch_log, WRITER)
    except tool_files.FileError as e:
        raise SubmitFailed(str(e))
    with log:
        try:
            proc = subprocess.Popen(sbatch_cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        except OSError as e:
            raise SubmitFailed("cannot start %s: %s (is Slurm's client installed?)" % (sbatch_cmd[0], e))
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            cancel(read_job_id(sbatch_log), env)
            # sbatch only waits for the job, which scancel ends: nothing of it to keep.
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise SubmitFailed("timed out after %.0f s (--timeout); job %s cancelled"
                               % (timeout, read_job_id(sbatch_log) or "?"))
        except KeyboardInterrupt:
            cancel(read_job_id(sbatch_log), env)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    if rc != 0:
        job_id = read_job_id(sbatch_log)
        said = sbatch_messages(sbatch_log)
        if job_id is None:
            raise SubmitFailed("sbatch refused the job (exit status %d)%s" % (rc, ": " + said if said else ""))
        raise SubmitFailed("Slurm job %s ended with exit status %d%s" % (job_id, rc, " (sbatch: %s)" % said if said else ""))
    return time.time() - start
