"""plot_common.py: what launch/plot_metrics.py and launch/plot_sweep.py share:
matplotlib on the Agg backend (no display on a cluster node or here), one
style for legible small PNGs, and the one-line error and exit codes.

Exit codes: 2 bad input (the file or flag named), 3 matplotlib missing.
PNGs are written whole or not at all, and an existing file of that name is
replaced only if ddp_train or one of its tools wrote it, or with --overwrite
(launch/ddp_tools/common/tool_files.py).
"""
import os
import sys

from ddp_tools.common import tool_files

EXIT_BAD_INPUT = 2
EXIT_NO_MATPLOTLIB = 3

# Small committed PNGs (under ~100 KB each) that stay readable: 90 dpi on a
# 8 x 4.5 inch figure is 720 x 405 pixels, with fonts sized for that.
DPI = 90
FIGSIZE = (8.0, 4.5)
DPI_OVERVIEW = 66


class NoMatplotlib(Exception):
    pass


def fail(program, message, code=EXIT_BAD_INPUT):
    """Print one line `program: error: message` to stderr and exit."""
    print(f"{program}: error: {message}", file=sys.stderr)
    sys.exit(code)


def note(program, message):
    print(f"{program}: note: {message}", file=sys.stderr)


def pyplot():
    """matplotlib.pyplot on the Agg backend; NoMatplotlib (with the fix in
    its message) when matplotlib is not importable by this python."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise NoMatplotlib(f"matplotlib is not installed for {sys.executable}: "
                           "apt-get install python3-matplotlib (or run launch/install_deps.sh)")
    plt.rcParams.update({
        "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
        "axes.grid": True, "grid.alpha": 0.3, "figure.dpi": DPI, "savefig.dpi": DPI,
    })
    return plt


def make_out_dir(program, out_dir):
    """Create out_dir (and parents); a path that is a file is bad input."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        fail(program, f"-o {out_dir}: exists and is not a directory")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        fail(program, f"-o {out_dir}: cannot create the directory ({e.strerror})")


def check_pngs(paths, inputs, overwrite):
    """Refuses (tool_files.FileError), before the first is drawn, a PNG path that
    is an input or an existing file this project did not write (unless overwrite)."""
    tool_files.check_outputs([(p, p) for p in paths], inputs, overwrite)


def save(plt, fig, path, writer, dpi=DPI):
    """Write fig to path as PNG (atomically, recorded as writer's) and free it
    (many plots in one process)."""
    fig.tight_layout()
    try:
        tool_files.write_atomic(path, path, lambda f: fig.savefig(f, format="png", dpi=dpi,
                                                                   pil_kwargs={"optimize": True}),
                                writer, binary=True)
    finally:
        plt.close(fig)
    return path
