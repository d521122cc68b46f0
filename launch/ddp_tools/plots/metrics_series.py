"""metrics_series.py: read a ddp_train --metrics file (JSON Lines) and pull
out the series that launch/plot_metrics.py plots and
launch/metrics_to_tensorboard.py writes, so both show the same numbers.

No matplotlib or tensorboard here: the extraction is tested on its own.

The file's records carry "event": "step" (every --log-every steps: loss,
loss_scale, skipped, lr, grad_norm, samples_per_s), "eval" (test_loss and,
for a classifier, test_accuracy), "memory", "summary", "stopped". Only step
and eval records feed series; the others are ignored. Non-finite figures are
written as null by ddp_train and are left out of a series (not plotted as 0).
"""
import json
import math
import os

from ddp_tools.common import tool_files


class MetricsError(Exception):
    """Bad input: the message is one line naming the file and the problem."""


class Series:
    """One curve: integer steps and float values, in step order."""

    def __init__(self, name, steps, values):
        self.name = name
        self.steps = steps
        self.values = values

    def __len__(self):
        return len(self.steps)

    def __repr__(self):
        return f"Series({self.name!r}, {len(self)} points)"


# name -> (event, field): the series every consumer shares, in display order.
# The values are as ddp_train writes them (accuracy a fraction in [0, 1]).
SERIES_FIELDS = {
    "train_loss": ("step", "loss"),
    "eval_loss": ("eval", "test_loss"),
    "eval_accuracy": ("eval", "test_accuracy"),
    "loss_scale": ("step", "loss_scale"),
    "lr": ("step", "lr"),
    "samples_per_s": ("step", "samples_per_s"),
    "grad_norm": ("step", "grad_norm"),
}


def read_records(path):
    """The JSON objects of a metrics file, in file order.

    A last line without its newline that does not parse is a record torn by
    a run that was killed mid-write: it is dropped (and noted in the return).
    Any other line that does not parse, or is not a JSON object, is an error.
    Returns (records, note or None).
    """
    name = os.path.basename(path)
    try:
        data = tool_files.read_bytes(path, path)
    except tool_files.FileError as e:
        raise MetricsError(str(e))
    lines = data.split(b"\n")
    torn_tail = not data.endswith(b"\n")
    records, note = [], None
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            # A torn record follows whole ones; a file of one unparseable
            # line is not a metrics file at all.
            if torn_tail and number == len(lines) and records:
                note = f"{name}: ignored the torn last line {number} (the run was cut mid-write)"
                continue
            raise MetricsError(f"{path}: line {number} is not JSON (not a ddp_train --metrics file?)")
        if not isinstance(record, dict):
            raise MetricsError(f"{path}: line {number} is not a JSON object (not a ddp_train --metrics file?)")
        records.append(record)
    return records, note


def _number(value):
    """A finite float, or None (null, a string, a bool, Inf/NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _by_step(records, event):
    """Records of one event keyed by integer step. A resumed run appends to
    the same file and repeats the steps after its checkpoint: the later
    record of a step wins, as it is the one the run continued from."""
    out = {}
    for r in records:
        if r.get("event") != event:
            continue
        step = r.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            continue
        out[step] = r
    return out


def extract(records, path="metrics"):
    """The series of one run: a dict name -> Series (SERIES_FIELDS names,
    plus "skipped" and "backoff"), with empty series where the file has no
    such figure. Raises MetricsError when there is no step record at all.

    skipped: the logged steps ddp_train marks skipped (non-finite gradients,
    no update). Only every --log-every-th step is logged, so a skip between
    two records shows only as a fall in the loss scale: backoff holds the
    records whose scale is below the previous record's (at least one step
    was skipped since then). Values of both are the loss scale there, for
    drawing on the loss-scale curve. A record holds the scale its step ran
    with, so a logged skip is followed by a fall at the next record: that
    fall is not a backoff entry, and each skip is marked once.
    """
    events = {"step": _by_step(records, "step"), "eval": _by_step(records, "eval")}
    if not events["step"]:
        raise MetricsError(f"{path}: no step records (was the run given --metrics and did it log a step?)")
    series = {}
    for name, (event, field) in SERIES_FIELDS.items():
        steps, values = [], []
        for step in sorted(events[event]):
            value = _number(events[event][step].get(field))
            if value is not None:
                steps.append(step)
                values.append(value)
        series[name] = Series(name, steps, values)
    skipped_steps, skipped_scales, backoff_steps, backoff_scales = [], [], [], []
    previous_scale, previous_skipped = None, False
    for step in sorted(events["step"]):
        record = events["step"][step]
        scale = _number(record.get("loss_scale"))
        logged_skip = record.get("skipped") is True
        if logged_skip:
            skipped_steps.append(step)
            skipped_scales.append(scale if scale is not None else float("nan"))
        if scale is not None:
            # A record holds the scale its step ran with, so a logged skip's
            # backoff shows at the next record: that fall is explained.
            fell = previous_scale is not None and scale < previous_scale
            if fell and not logged_skip and not previous_skipped:
                backoff_steps.append(step)
                backoff_scales.append(scale)
            previous_scale = scale
        previous_skipped = logged_skip
    series["skipped"] = Series("skipped", skipped_steps, skipped_scales)
    series["backoff"] = Series("backoff", backoff_steps, backoff_scales)
    return series


def summary_record(records):
    """The last summary record, or None (a run that was stopped has none)."""
    found = None
    for r in records:
        if r.get("event") == "summary":
            found = r
    return found


def load_run(path):
    """(series, notes) of one metrics file; MetricsError on bad input."""
    records, note = read_records(path)
    series = extract(records, path)
    notes = [note] if note else []
    return series, notes
