"""plot_metrics.py: PNG plots of ddp_train --metrics files (JSON Lines).

  launch/plot_metrics.py run.jsonl [run2.jsonl ...] -o DIR [--label NAME ...] [--prefix P] [--overwrite]

Writes to DIR (P prepended to each name):
  loss.png          training loss (solid) and test/validation loss (dashed, dots)
  accuracy.png      test accuracy in % (classifiers; a GPT has none)
  loss_scale.png    the dynamic loss scale on a log2 axis; skipped steps marked
  lr.png            learning rate
  throughput.png    samples/s (a GPT's samples are --block-size token windows)
  grad_norm.png     global gradient L2 norm (before clipping)
  overview.png      all of the above in one figure
(--panels loss,loss_scale,... writes only those).
against the optimizer step, one line per run (legend: --label, one per file
in order, else the file's stem). A series no run has is skipped with a note;
one some runs lack is noted. Bad input (missing file, no step records, a
garbled line other than a torn last one, a PNG name that is an input, or an
existing file that neither ddp_train nor one of its tools wrote, without
--overwrite): one line, exit 2, nothing written. A PNG this project wrote
is replaced, and a line on stderr says so. No matplotlib: one line, exit 3.
"""
import argparse
import os
import sys

from ddp_tools.common import tool_files
from ddp_tools.plots import metrics_series
from ddp_tools.plots import plot_common

PROGRAM = "plot_metrics"
WRITER = "plot_metrics.py -o"  # who wrote the PNGs, in the output registry
STEP_LABEL = "optimizer step"


def run_labels(paths, labels):
    """--label NAME per file if given, else the file stems; stems that
    repeat (run1/metrics.jsonl, run2/metrics.jsonl) get their folder too."""
    if labels:
        if len(labels) != len(paths):
            raise metrics_series.MetricsError(
                f"--label given {len(labels)} times for {len(paths)} metrics files (give one per file or none)")
        return list(labels)
    stems = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    out = []
    for path, stem in zip(paths, stems):
        if stems.count(stem) > 1:
            parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
            stem = f"{parent}/{stem}"
        out.append(stem)
    return out


def load_runs(paths, labels=None):
    """[(label, series)] of the files, and the notes to print (torn lines).
    MetricsError on the first bad file."""
    runs, notes = [], []
    for label, path in zip(run_labels(paths, labels), paths):
        series, run_notes = metrics_series.load_run(path)
        runs.append((label, series))
        notes.extend(run_notes)
    return runs, notes


def _color(i):
    return f"C{i % 10}"


def _width_under(i, runs):
    """Line width for curves that often coincide across runs (the loss scale,
    a shared schedule): earlier runs wider, so a later one drawn on top
    leaves them visible."""
    return 1.2 + 1.5 * (len(runs) - 1 - i)


def _draw_loss(ax, runs):
    for i, (label, s) in enumerate(runs):
        if len(s["train_loss"]):
            ax.plot(s["train_loss"].steps, s["train_loss"].values, color=_color(i), lw=1.2,
                    label=f"{label} training")
        if len(s["eval_loss"]):
            ax.plot(s["eval_loss"].steps, s["eval_loss"].values, color=_color(i), lw=1.2, ls="--",
                    marker="o", ms=4, label=f"{label} test/validation")
    ax.set_ylabel("loss (nats; MSE for --loss mse)")
    ax.set_title("Training and test/validation loss")


def _draw_accuracy(ax, runs):
    for i, (label, s) in enumerate(runs):
        a = s["eval_accuracy"]
        if len(a):
            ax.plot(a.steps, [100.0 * v for v in a.values], color=_color(i), marker="o", ms=4, lw=1.2,
                    label=label)
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("Test/validation accuracy (a GPT's: next token)")


def _draw_loss_scale(ax, runs):
    skipped_labelled = backoff_labelled = False
    for i, (label, s) in enumerate(runs):
        sc = s["loss_scale"]
        if len(sc):
            ax.step(sc.steps, sc.values, where="post", color=_color(i), lw=_width_under(i, runs), label=label)
        if len(s["skipped"]):
            ax.plot(s["skipped"].steps, s["skipped"].values, ls="none", marker="x", ms=7, mew=1.6,
                    color="red", label=None if skipped_labelled else "skipped step (logged)")
            skipped_labelled = True
        if len(s["backoff"]):
            ax.plot(s["backoff"].steps, s["backoff"].values, ls="none", marker="v", ms=6,
                    color="darkorange",
                    label=None if backoff_labelled else "scale fell: a step skipped since the last record")
            backoff_labelled = True
    ax.set_yscale("log", base=2)
    ax.set_ylabel("loss scale (log2 axis)")
    ax.set_title("Dynamic loss scale")


def _draw_lr(ax, runs):
    for i, (label, s) in enumerate(runs):
        if len(s["lr"]):
            ax.plot(s["lr"].steps, s["lr"].values, color=_color(i), lw=_width_under(i, runs), label=label)
    ax.set_ylabel("learning rate")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    ax.set_title("Learning rate")


def _draw_throughput(ax, runs):
    for i, (label, s) in enumerate(runs):
        t = s["samples_per_s"]
        if len(t):
            ax.plot(t.steps, t.values, color=_color(i), lw=1.2, label=label)
    ax.set_ylabel("throughput (samples/s, all ranks)")
    ax.set_ylim(bottom=0)
    ax.set_title("Throughput over the last --log-every steps")


def _draw_grad_norm(ax, runs):
    for i, (label, s) in enumerate(runs):
        g = s["grad_norm"]
        if len(g):
            ax.plot(g.steps, g.values, color=_color(i), lw=1.0, label=label)
    ax.set_ylabel("gradient L2 norm")
    ax.set_title("Global gradient norm (before clipping)")


# file name -> (the series it needs, what to call them in a note, drawer)
PANELS = [
    ("loss", ("train_loss", "eval_loss"), "loss", _draw_loss),
    ("accuracy", ("eval_accuracy",), "test accuracy", _draw_accuracy),
    ("loss_scale", ("loss_scale",), "loss scale", _draw_loss_scale),
    ("lr", ("lr",), "learning rate", _draw_lr),
    ("throughput", ("samples_per_s",), "samples/s", _draw_throughput),
    ("grad_norm", ("grad_norm",), "gradient norm", _draw_grad_norm),
]

SERIES_WORDS = {"train_loss": "training loss", "eval_loss": "test/validation loss (no eval record)",
                "eval_accuracy": "test accuracy (not a classifier?)", "loss_scale": "loss scale",
                "lr": "learning rate", "samples_per_s": "samples/s", "grad_norm": "gradient norm"}


def missing_notes(runs):
    """One note per run and series it lacks (that others may have)."""
    notes = []
    for label, s in runs:
        for name, words in SERIES_WORDS.items():
            if not len(s[name]):
                notes.append(f"{label}: no {words}; left out of its plot")
    return notes


def _finish(ax):
    ax.set_xlabel(STEP_LABEL)
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(loc="best", framealpha=0.8)


PANEL_NAMES = [p[0] for p in PANELS] + ["overview"]


def _has(runs, needs):
    return any(len(s[n]) for _, s in runs for n in needs)


def planned_files(runs, out_dir, prefix="", panels=None):
    """The paths plot_runs(runs, out_dir, prefix, panels) writes, in order."""
    wanted = set(panels or PANEL_NAMES)
    present = [name for name, needs, _, _ in PANELS if _has(runs, needs)]
    names = [name for name in present if name in wanted]
    if present and "overview" in wanted:
        names.append("overview")
    return [os.path.join(out_dir, f"{prefix}{name}.png") for name in names]


def plot_runs(runs, out_dir, prefix="", panels=None):
    """Write the PNGs for runs [(label, series)] to out_dir (only the
    PANEL_NAMES in panels when given); returns (paths written, notes about
    panels left out)."""
    plt = plot_common.pyplot()
    wanted = set(panels or PANEL_NAMES)
    written, notes = [], []
    present = []
    for name, needs, words, draw in PANELS:
        if not _has(runs, needs):
            notes.append(f"no run has {words}: {prefix}{name}.png not written")
            continue
        present.append((name, draw))
        if name not in wanted:
            continue
        fig, ax = plt.subplots(figsize=plot_common.FIGSIZE)
        draw(ax, runs)
        _finish(ax)
        written.append(plot_common.save(plt, fig, os.path.join(out_dir, f"{prefix}{name}.png"), WRITER))
    if present and "overview" in wanted:
        rows = (len(present) + 1) // 2
        fig, axes = plt.subplots(rows, 2, figsize=(11.0, 2.9 * rows), squeeze=False)
        for ax, (name, draw) in zip(axes.flat, present):
            draw(ax, runs)
            _finish(ax)
        for ax in list(axes.flat)[len(present):]:
            ax.set_visible(False)
        # Lower dpi keeps the many-panel figure small (under ~100 KB).
        written.append(plot_common.save(plt, fig, os.path.join(out_dir, f"{prefix}overview.png"), WRITER,
                                        dpi=plot_common.DPI_OVERVIEW))
    return written, notes


def main(argv=None):
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("metrics", nargs="+", help="ddp_train --metrics files (JSON Lines)")
    parser.add_argument("-o", "--out-dir", required=True, help="directory for the PNGs (created)")
    parser.add_argument("--label", action="append", default=[], help="legend name, one per file in order")
    parser.add_argument("--prefix", default="", help="prepended to each PNG name")
    parser.add_argument("--panels", help="comma-separated subset of " + ",".join(PANEL_NAMES) + " (default: all)")
    tool_files.add_overwrite_flag(parser)
    args = parser.parse_args(argv)
    panels = None
    if args.panels is not None:
        panels = [p.strip() for p in args.panels.split(",") if p.strip()]
        unknown = [p for p in panels if p not in PANEL_NAMES]
        if unknown or not panels:
            plot_common.fail(PROGRAM, f"--panels {args.panels}: expected names from {','.join(PANEL_NAMES)}")
    if "/" in args.prefix:
        plot_common.fail(PROGRAM, f"--prefix {args.prefix}: a prefix of the PNG names, not a path (no '/'; "
                         "-o chooses the directory)")
    try:
        runs, notes = load_runs(args.metrics, args.label)
    except metrics_series.MetricsError as e:
        plot_common.fail(PROGRAM, str(e))
    try:
        plot_common.pyplot()
    except plot_common.NoMatplotlib as e:
        plot_common.fail(PROGRAM, str(e), plot_common.EXIT_NO_MATPLOTLIB)
    if os.path.isdir(args.out_dir):  # a directory still to be made holds nothing to lose
        try:
            plot_common.check_pngs(planned_files(runs, args.out_dir, args.prefix, panels), args.metrics,
                                   args.overwrite)
        except tool_files.FileError as e:
            plot_common.fail(PROGRAM, str(e))
    plot_common.make_out_dir(PROGRAM, args.out_dir)
    try:
        written, panel_notes = plot_runs(runs, args.out_dir, args.prefix, panels)
    except tool_files.FileError as e:
        plot_common.fail(PROGRAM, str(e))
    for n in notes + missing_notes(runs) + panel_notes:
        plot_common.note(PROGRAM, n)
    for path in written:
        print(path)


def cli():
    main()


if __name__ == "__main__":
    sys.exit(cli())
