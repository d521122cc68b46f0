"""metrics_to_tensorboard.py: a ddp_train --metrics file (JSON Lines) as
TensorBoard event files, for `tensorboard --logdir DIR`.

  launch/metrics_to_tensorboard.py run.jsonl DIR

The series are launch/plot_metrics.py's (launch/ddp_tools/plots/metrics_series.py), one
scalar tag each, against the optimizer step:
  train/loss, eval/loss, eval/accuracy (a fraction, as ddp_train writes it),
  train/loss_scale, train/skipped (1 at the logged steps ddp_train skipped),
  train/lr, train/samples_per_s, train/grad_norm.
A series the file lacks (a regression has no accuracy) is left out with a
note. They are written through the tensorboard package's own writer
(tensorboard.summary.Writer: no TensorFlow needed), so TensorBoard reads
them as it reads its own; values are stored as float32, as TensorBoard
stores every scalar.

The PyPI package `tensorboard` is installed for this python (with pip's
--break-system-packages, as launch/install_deps.sh does for safetensors)
when it is missing. Bad input: one line, exit 2; tensorboard missing and not
installable (no network): one line, exit 3.
"""
import argparse
import os
import subprocess
import sys

from ddp_tools.plots import metrics_series

PROGRAM = "metrics_to_tensorboard"
EXIT_BAD_INPUT = 2
EXIT_NO_TENSORBOARD = 3

# metrics_series name -> TensorBoard tag
TAGS = {
    "train_loss": "train/loss",
    "eval_loss": "eval/loss",
    "eval_accuracy": "eval/accuracy",
    "loss_scale": "train/loss_scale",
    "lr": "train/lr",
    "samples_per_s": "train/samples_per_s",
    "grad_norm": "train/grad_norm",
}
SKIPPED_TAG = "train/skipped"
DESCRIPTIONS = {
    "train/loss": "training loss of the logged step (nats for cross-entropy)",
    "eval/loss": "test/validation loss (nats for cross-entropy)",
    "eval/accuracy": "test accuracy, a fraction (a GPT's: next-token accuracy)",
    "train/loss_scale": "dynamic loss scale the step ran with",
    SKIPPED_TAG: "1 where the logged step was skipped (non-finite gradients), else 0",
    "train/lr": "learning rate",
    "train/samples_per_s": "samples/s over all ranks since the previous log step",
    "train/grad_norm": "global gradient L2 norm before clipping",
}


def have_tensorboard():
    try:
        import tensorboard.summary  # noqa: F401
        return True
    except ImportError:
        return False


def ensure_tensorboard(quiet=False):
    """True when tensorboard is importable, installing it from PyPI first if
    needed (short pip timeouts: without network it gives up in seconds, so
    a test under ctest's 120 s limit can skip)."""
    if have_tensorboard():
        return True
    if not quiet:
        print(f"{PROGRAM}: installing tensorboard (PyPI) for {sys.executable}", file=sys.stderr)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "--timeout", "10", "--retries", "0"]
    # PEP 668: Debian's python needs --break-system-packages from pip 23 on;
    # an older pip lacks the flag (it says so), then it goes without.
    for extra in (["--break-system-packages"], []):
        try:
            done = subprocess.run(pip + extra + ["tensorboard"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True, timeout=90)
        except (OSError, subprocess.TimeoutExpired):
            break
        if done.returncode == 0 or "--break-system-packages" not in done.stderr:
            break
    import importlib
    importlib.invalidate_caches()
    return have_tensorboard()


def tensorboard_series(series):
    """tag -> (steps, values) of a run's series (metrics_series.extract),
    the tags with no point left out."""
    out = {}
    for name, tag in TAGS.items():
        s = series[name]
        if len(s):
            out[tag] = (list(s.steps), list(s.values))
    if len(series["loss_scale"]) or len(series["skipped"]):
        # train/skipped at every logged step (0 or 1), so TensorBoard shows
        # where skips were and were not, not only a few isolated points.
        skipped = set(series["skipped"].steps)
        steps = sorted(set(series["loss_scale"].steps) | skipped)
        out[SKIPPED_TAG] = (steps, [1.0 if s in skipped else 0.0 for s in steps])
    return out


def write_events(series, out_dir, wall_time=None):
    """Write the run's tags to a new event file in out_dir; returns the
    {tag: (steps, values)} written. wall_time (seconds since the epoch) for
    every point, else the time of writing (the metrics carry no clock)."""
    from tensorboard.summary import Writer
    tags = tensorboard_series(series)
    os.makedirs(out_dir, exist_ok=True)
    writer = Writer(out_dir)
    try:
        for tag, (steps, values) in tags.items():
            for i, (step, value) in enumerate(zip(steps, values)):
                writer.add_scalar(tag, value, step, wall_time=wall_time,
                                  description=DESCRIPTIONS.get(tag) if i == 0 else None)
        writer.flush()
    finally:
        writer.close()
    return tags


def read_events(out_dir):
    """{tag: (steps, values)} of the scalars in out_dir's event files, read
    by TensorBoard's own EventAccumulator (the tests' check)."""
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.util import tensor_util
    acc = event_accumulator.EventAccumulator(out_dir, size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags().get(event_accumulator.TENSORS, []):
        events = acc.Tensors(tag)
        out[tag] = ([e.step for e in events], [float(tensor_util.make_ndarray(e.tensor_proto)) for e in events])
    return out


def fail(message, code=EXIT_BAD_INPUT):
    print(f"{PROGRAM}: error: {message}", file=sys.stderr)
    sys.exit(code)


def main(argv=None):
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("metrics", help="a ddp_train --metrics file (JSON Lines)")
    parser.add_argument("out_dir", help="TensorBoard log directory (created; a new event file per call)")
    args = parser.parse_args(argv)
    try:
        series, notes = metrics_series.load_run(args.metrics)
    except metrics_series.MetricsError as e:
        fail(str(e))
    if os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
        fail(f"{args.out_dir}: exists and is not a directory")
    if not ensure_tensorboard():
        fail(f"the tensorboard package is not installed for {sys.executable} and pip could not install it "
             "(no network?): pip install tensorboard", EXIT_NO_TENSORBOARD)
    try:
        tags = write_events(series, args.out_dir)
    except OSError as e:
        fail(f"{args.out_dir}: cannot write the event file ({e.strerror})")
    for tag in TAGS.values():
        if tag not in tags:
            notes.append(f"{os.path.basename(args.metrics)} has no {tag} series; left out")
    for n in notes:
        print(f"{PROGRAM}: note: {n}", file=sys.stderr)
    points = sum(len(steps) for steps, _ in tags.values())
    print(f"wrote {len(tags)} tags ({points} points) to {args.out_dir}: tensorboard --logdir {args.out_dir}")


def cli():
    main()


if __name__ == "__main__":
    sys.exit(cli())
