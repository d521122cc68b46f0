"""tune_trial.py: one ddp_train trial of launch/tune.py: run it, follow its metrics, prune it.

The trial runs in its own process group (so SIGTERM reaches mpirun and its ranks
alike) with its command, log and metrics in the trial's directory. Its metrics
file is read while it runs; each intermediate value goes to Optuna, and when the
pruner says so the group gets SIGTERM (ddp_train stops at the next step boundary).
The trial's files are checked before it starts (a file there that this project did
not write, left by a deleted study, ends the search with one line unless --overwrite)
and recorded as tune.py's once it has ended (launch/ddp_tools/common/tool_files.py).
"""

import json
import math
import os
import shlex
import signal
import subprocess
import time

import optuna

from ddp_tools.common import tool_files
from ddp_tools.tune import tune_space

POLL_S = 0.2          # how often the metrics file is read while the trial runs
READ_BYTES = 1 << 20  # read at most this much per poll, so a prune is not held up
                      # by parsing the megabytes a fast trial writes meanwhile
TERM_GRACE_S = 60     # after SIGTERM, how long the trial may take to stop before SIGKILL
WRITER = "tune.py --study-dir"  # who wrote a trial's files, in the output registry


class TrialFailed(Exception):
    """The trial ran but gave no objective (non-zero exit, no summary): a FAIL trial."""


class MetricsFollower:
    """Reads a growing JSON Lines file and yields the objective's intermediate values.

    mode "step": every eval record (or step record, for samples_per_s) at its step.
    mode "epoch": only the last eval of each epoch, at the epoch's number, so trials
    with different batch sizes are compared after the same passes over the data (an
    epoch's last eval is known once a record of a later epoch, or the end, arrives).
    """

    def __init__(self, path, key, direction, mode):
        self.path, self.key, self.mode = path, key, mode
        self.worst = math.inf if direction == "minimize" else -math.inf
        self.offset, self.partial = 0, b""
        self.drained = False
        self.summary = None
        self.pending = None      # (step or epoch, value) held until a later record arrives

    def value(self, record):
        """A record's value of the objective; null (a non-finite loss) is the worst."""
        value = record.get(self.key)
        if value is None or not math.isfinite(float(value)):
            return self.worst
        return float(value)

    def poll(self, finished):
        """(step, value, is_last) of what was read (up to READ_BYTES); finished: the trial had
        ended before this call. self.drained says whether the file's end was reached.

        A value is held back until a later record shows whether it was the run's
        last (then the summary follows it): the last is the result, not an
        intermediate value to prune on, so a trial that finished is never pruned."""
        reports = []
        for record in self._new_records():
            if record.get("event") == "summary":
                self.summary = record
                if self.pending:
                    reports.append(self.pending + (True,))
                    self.pending = None
                continue
            if self.pending and self._releases(record):
                reports.append(self.pending + (False,))
                self.pending = None
            item = self._item(record)
            if item:
                self.pending = item
        if finished and self.drained and self.pending:
            reports.append(self.pending + (True,))
            self.pending = None
        return reports

    def _item(self, record):
        """(step, value) of a record that carries the objective, else None."""
        event = record.get("event")
        if self.key == "samples_per_s":
            if event == "step" and "samples_per_s" in record:
                return int(record["step"]), self.value(record)
        elif event == "eval" and not record.get("eval_only"):
            return int(record["epoch" if self.mode == "epoch" else "step"]), self.value(record)
        return None

    def _releases(self, record):
        """Whether a record shows that training went on after the held value (for an
        epoch's value: that a later epoch started, so it was the epoch's last too)."""
        if record.get("event") not in ("step", "eval"):
            return False                  # e.g. a checkpoint record after the last step
        if self.mode == "epoch" and self.key != "samples_per_s":
            return int(record.get("epoch", 0)) > self.pending[0]
        return int(record.get("step", 0)) > self.pending[0]

    def _new_records(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read(READ_BYTES)
        except FileNotFoundError:
            self.drained = True
            return []
        self.drained = len(chunk) < READ_BYTES
        self.offset += len(chunk)
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()          # an incomplete last line waits for its end
        records = []
        for line in lines:
            try:
                records.append(json.loads(line))
            except ValueError:
                continue                   # not a record (cannot happen in a ddp_train file)
        return records


def group_alive(pgid):
    """Whether a process of the group still runs. Zombies do not count: an orphan's
    zombie waits for init to reap it, which in some containers never happens."""
    if not os.path.isdir("/proc/self"):
        try:
            os.killpg(pgid, 0)
            return True
        except ProcessLookupError:
            return False
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()   # after "pid (comm)"
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                return True
    return False


def stop_group(proc):
    """SIGTERM the trial's process group, then SIGKILL what is left of it after a grace.

    The group, not only its leader: under a launcher (mpirun, srun, a shell) the
    leader may end before the processes it started."""
    pgid = proc.pid
    for sig, grace in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 10)):
        if proc.poll() is not None and not group_alive(pgid):
            return
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (proc.poll() is None or group_alive(pgid)):
            time.sleep(0.05)
    proc.wait()


def run_trial(trial, cfg):
    """The objective: run one trial and return its summary's metric (or raise Pruned/Failed)."""
    values = {p.name: p.suggest(trial) for p in cfg.params}
    trial_dir = cfg.study_dir / f"trial-{trial.number:04d}"
    trial_dir.mkdir(parents=True, exist_ok=True)
    metrics, command, log_path = (str(trial_dir / name) for name in ("metrics.jsonl", "command.txt", "log.txt"))
    # FileError (not TrialFailed): the search stops with one line, and this trial is not counted.
    tool_files.check_outputs([(p, p) for p in (metrics, command, log_path)], overwrite=cfg.overwrite)
    if os.path.exists(metrics):
        os.unlink(metrics)                # a directory left by a deleted study: start clean
    cmd = (cfg.launcher + cfg.trainer + tune_space.param_args(values)
           + ["--metrics", metrics] + cfg.trial_args)
    tool_files.write_text_atomic(command, command, shlex.join(cmd) + "\n", WRITER)
    follower = MetricsFollower(metrics, cfg.metric_key, cfg.direction, cfg.report_mode)
    start = time.monotonic()
    # The log stays open until the trial has ended: closed, it is recorded complete.
    with tool_files.open_output(log_path, log_path, WRITER, "wb") as log:
        try:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as err:  # the trainer or launcher gone (or rebuilt) since the search began
            reason = f"cannot start {cmd[0]} ({err.strerror})"
            log.write((reason + "\n").encode())
            trial.set_user_attr("wall_s", time.monotonic() - start)
            trial.set_user_attr("fail_reason", reason)
            raise TrialFailed(f"trial {trial.number}: {reason}") from None
        try:
            trial.set_user_attr("pgid", proc.pid)     # the trial's process group (its own session)
            _follow(trial, proc, follower)
        except optuna.TrialPruned:
            trial.set_user_attr("wall_s", time.monotonic() - start)
            raise
        except BaseException:                 # Ctrl-C or SIGTERM of tune.py: stop the trial too
            stop_group(proc)
            trial.set_user_attr("interrupted", True)
            raise
        finally:
            if os.path.isfile(metrics):       # ddp_train's, complete now that the trial has ended
                tool_files.record(metrics, WRITER)
    trial.set_user_attr("wall_s", time.monotonic() - start)
    trial.set_user_attr("exit_status", proc.returncode)
    if proc.returncode != 0 or follower.summary is None:
        reason = f"exit status {proc.returncode}" if proc.returncode != 0 else "no summary record"
        trial.set_user_attr("fail_reason", reason)
        raise TrialFailed(f"trial {trial.number}: {reason} (see {trial_dir / 'log.txt'})")
    return follower.value(follower.summary)


def _follow(trial, proc, follower):
    """Reports intermediate values until the trial ends; prunes it when the pruner says so."""
    while True:
        finished = proc.poll() is not None
        for step, value, is_last in follower.poll(finished):
            trial.report(value, step)
            if not is_last and trial.should_prune():
                stop_group(proc)
                trial.set_user_attr("pruned_at", step)
                trial.set_user_attr("exit_status", proc.returncode)
                raise optuna.TrialPruned(f"pruned at step {step} ({value:.6g})")
        if finished and follower.drained:
            return
        if follower.drained:
            time.sleep(POLL_S)
