"""plot_sweep.py: PNG plots of a scaling sweep (launch/scaling_sweep.py's
sweep.csv), with the scaling model's prediction drawn over the measured
points when given.

  launch/plot_sweep.py sweep.csv [--prediction pred.csv] -o DIR [--overwrite]

Writes DIR/sweep_samples_per_s.png and DIR/sweep_efficiency.png: samples/s
and efficiency (%) against the rank count N on a log2 axis; measured points
as markers (one series per mode in the CSV), ideal linear scaling from the
smallest N dotted, and the prediction's rows of the same mode as lines
(one per ZeRO stage; see prediction_series for several algorithms).

An existing PNG of that name is replaced only if ddp_train or one of its
tools wrote it (said on stderr), or with --overwrite.

Importable: plot_sweep(csv_path, prediction_path_or_None, out_dir,
overwrite=False) -> [png paths]; raises SweepError on bad input. As a
script: bad input is one line and exit 2; no matplotlib, one line and exit 3.
"""
import argparse
import csv
import io
import math
import os
import sys

from ddp_tools.common import tool_files
from ddp_tools.plots import plot_common

PROGRAM = "plot_sweep"
WRITER = "plot_sweep.py -o"  # who wrote the PNGs, in the output registry
NEEDED = ("ranks", "samples_per_s", "efficiency")
FIGURES = ("sweep_samples_per_s", "sweep_efficiency")
# The most ranks a row may name: MPI counts ranks in an int. Beyond, a
# number such as 1e300 is no rank count, and the log2 axis cannot hold it.
MAX_RANKS = 2 ** 31 - 1


class SweepError(Exception):
    """Bad input; the message is one line naming the file and the problem."""


def _float(text):
    """A finite float from a CSV cell, or None for an empty/unparseable one."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def read_rows(path, what):
    """The rows of a sweep or prediction CSV as dicts with ranks (int),
    samples_per_s and efficiency (float or None), and the text columns
    mode, algorithm, zero_stage ("" when absent). Rows are sorted by ranks."""
    try:
        text = tool_files.read_text(path, path, tool_files.SMALL_INPUT_BYTES, f"a {what} CSV")
    except tool_files.FileError as e:
        raise SweepError(str(e))
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = reader.fieldnames or []
        missing = [c for c in NEEDED if c not in header]
        if missing:
            raise SweepError(f"{path}: no column {', '.join(missing)} (not a {what} CSV?)")
        rows = []
        for number, raw in enumerate(reader, start=2):
            if None in raw.values():  # DictReader's filler for the cells a short row lacks
                raise SweepError(f"{path}: line {number} has fewer cells than the header (a torn file?)")
            ranks = _float(raw.get("ranks"))
            if ranks is None or not 1 <= ranks <= MAX_RANKS or ranks != int(ranks):
                raise SweepError(f"{path}: line {number}: ranks {raw.get('ranks')!r} is not a whole number "
                                 f"from 1 to {MAX_RANKS}")
            rows.append({
                "ranks": int(ranks),
                "samples_per_s": _float(raw.get("samples_per_s")),
                "efficiency": _float(raw.get("efficiency")),
                "mode": (raw.get("mode") or "").strip(),
                "algorithm": (raw.get("algorithm") or "").strip(),
                "zero_stage": (raw.get("zero_stage") or "").strip(),
            })
    except csv.Error as e:
        raise SweepError(f"{path}: not a CSV ({e})")
    if not rows:
        raise SweepError(f"{path}: no data rows")
    rows.sort(key=lambda r: r["ranks"])
    return rows


def measured_series(rows):
    """mode -> (ranks, samples_per_s, efficiency) of the measured rows, the
    rows lacking a figure left out of that figure's list (as None)."""
    out = {}
    for r in rows:
        out.setdefault(r["mode"] or "measured", []).append(r)
    return {mode: ([r["ranks"] for r in rs], [r["samples_per_s"] for r in rs], [r["efficiency"] for r in rs])
            for mode, rs in out.items()}


def prediction_series(rows, modes):
    """(label, mode) -> (ranks, samples_per_s, efficiency) of the prediction
    rows whose mode is one of the sweep's (every row when the prediction or
    the sweep has no mode column), one line per mode and ZeRO stage.

    launch/scaling_model.py names in `algorithm` the collectives a row used
    (with --algorithm auto, the faster per N: "ring", "hier-tree", ...), so
    a name that changes along N is still one line. Only when an N repeats
    within a mode and stage (predictions for several algorithms in one
    file) is the line split by algorithm, and then only "auto" is drawn
    when there is one.
    """
    wanted = [r for r in rows if not r["mode"] or not modes or r["mode"] in modes]
    stages = {r["zero_stage"] for r in wanted}
    by_mode_stage = {}
    for r in wanted:
        by_mode_stage.setdefault((r["mode"], r["zero_stage"]), []).append(r)
    lines = {}
    for (mode, stage), group in by_mode_stage.items():
        stage_text = [f"ZeRO {stage}"] if len(stages) > 1 else []
        ranks = [r["ranks"] for r in group]
        if len(set(ranks)) == len(ranks):
            names = {r["algorithm"] for r in group}
            algorithm_text = [names.pop()] if len(names) == 1 and "" not in names else []
            lines[(", ".join(["model"] + algorithm_text + stage_text), mode)] = group
            continue
        by_algorithm = {}
        for r in group:
            by_algorithm.setdefault(r["algorithm"], []).append(r)
        if "auto" in by_algorithm:
            by_algorithm = {"auto": by_algorithm["auto"]}
        for algorithm, rs in by_algorithm.items():
            lines[(", ".join(["model"] + ([algorithm] if algorithm else []) + stage_text), mode)] = rs
    return {key: ([r["ranks"] for r in rs], [r["samples_per_s"] for r in rs], [r["efficiency"] for r in rs])
            for key, rs in lines.items()}


def _points(xs, ys, scale=1.0):
    kept = [(x, y * scale) for x, y in zip(xs, ys) if y is not None]
    return [x for x, _ in kept], [y for _, y in kept]


def _log2_axis(ax, all_ranks):
    ax.set_xscale("log", base=2)
    lo, hi = min(all_ranks), max(all_ranks)
    ticks = [2 ** k for k in range(int(math.floor(math.log2(lo))), int(math.ceil(math.log2(hi))) + 1)]
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlim(lo / 1.3, hi * 1.3)
    ax.set_xlabel("ranks N (log2 axis)")


def plot_sweep(csv_path, prediction_path, out_dir, overwrite=False):
    """Write the two PNGs to out_dir (created); returns their paths."""
    measured = measured_series(read_rows(csv_path, "sweep"))
    predicted = {}
    if prediction_path is not None:
        predicted = prediction_series(read_rows(prediction_path, "prediction"),
                                      {m for m in measured if m != "measured"})
        if not predicted:
            raise SweepError(f"{prediction_path}: no row of the sweep's mode ({', '.join(sorted(measured))})")
    if not any(y is not None for _, sps, _ in measured.values() for y in sps):
        raise SweepError(f"{csv_path}: no row has samples_per_s")
    plt = plot_common.pyplot()
    pngs = [os.path.join(out_dir, figure + ".png") for figure in FIGURES]
    try:
        if os.path.isdir(out_dir):  # a directory still to be made holds nothing to lose
            plot_common.check_pngs(pngs, [p for p in (csv_path, prediction_path) if p], overwrite)
        os.makedirs(out_dir, exist_ok=True)
    except tool_files.FileError as e:
        raise SweepError(str(e))
    except OSError as e:
        raise SweepError(f"{out_dir}: cannot create the directory ({e.strerror})")
    all_ranks = [n for xs, _, _ in list(measured.values()) + list(predicted.values()) for n in xs]
    paths = []
    for png, index, scale, ylabel, title in (
            (pngs[0], 1, 1.0, "throughput (samples/s, all ranks)", "Throughput against ranks"),
            (pngs[1], 2, 100.0, "scaling efficiency (%)", "Efficiency against ranks")):
        fig, ax = plt.subplots(figsize=plot_common.FIGSIZE)
        drawn = []  # every y plotted, to choose a linear or log axis
        for i, (mode, series) in enumerate(sorted(measured.items())):
            xs, ys = _points(series[0], series[index], scale)
            if not xs:
                continue
            drawn += ys
            ax.plot(xs, ys, ls="none", marker="o", ms=7, color=f"C{i}", label=f"measured ({mode})", zorder=3)
            if index == 1:
                # Ideal: N/N0 times the smallest N's throughput.
                ideal_x = sorted(set(n for n in all_ranks if n >= xs[0]))
                ideal_y = [ys[0] * n / xs[0] for n in ideal_x]
                drawn += ideal_y
                ax.plot(ideal_x, ideal_y, ls=":", color=f"C{i}", lw=1, label=f"ideal linear ({mode})")
        for j, ((label, mode), series) in enumerate(sorted(predicted.items())):
            xs, ys = _points(series[0], series[index], scale)
            if xs:
                drawn += ys
                ax.plot(xs, ys, lw=1.6, color=f"C{(j + 3) % 10}", label=label + (f" ({mode})" if mode else ""))
        if index == 2:
            ax.axhline(100.0, color="gray", ls=":", lw=1)
            ax.set_ylim(bottom=0)
        else:
            positive = [y for y in drawn if y > 0]
            if positive and max(positive) / min(positive) > 16:
                ax.set_yscale("log", base=10)
                ax.set_ylabel(ylabel + ", log axis")
        _log2_axis(ax, all_ranks)
        if ax.get_yscale() == "linear":
            ax.set_ylabel(ylabel)
            ax.set_ylim(bottom=0)  # a linear axis from 0, so ratios read true
        ax.set_title(title)
        ax.legend(loc="best", framealpha=0.8)
        try:
            paths.append(plot_common.save(plt, fig, png, WRITER))
        except tool_files.FileError as e:
            raise SweepError(str(e))
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep_csv", help="launch/scaling_sweep.py's sweep.csv")
    parser.add_argument("--prediction", help="the scaling model's CSV, drawn over the measured points")
    parser.add_argument("-o", "--out-dir", required=True, help="directory for the PNGs (created)")
    tool_files.add_overwrite_flag(parser)
    args = parser.parse_args(argv)
    if os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
        plot_common.fail(PROGRAM, f"-o {args.out_dir}: exists and is not a directory")
    try:
        paths = plot_sweep(args.sweep_csv, args.prediction, args.out_dir, args.overwrite)
    except SweepError as e:
        plot_common.fail(PROGRAM, str(e))
    except plot_common.NoMatplotlib as e:
        plot_common.fail(PROGRAM, str(e), plot_common.EXIT_NO_MATPLOTLIB)
    for p in paths:
        print(p)


def cli():
    main()


if __name__ == "__main__":
    sys.exit(cli())
