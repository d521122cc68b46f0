"""tune_report.py: what launch/tune.py writes at the end of a search.

trials.md (the Markdown table of every trial, also printed), best.ini (the best
trial's parameters as `ddp_train --config` reads them) and PNG plots through
optuna.visualization.matplotlib: the optimisation history, and the parameter
importances (two or more parameters and enough complete trials) or else a slice plot.
Each is written whole (a temporary file renamed over it: launch/ddp_tools/common/tool_files.py), so
a search stopped while it reports leaves the earlier file, not half of one, and recorded as
tune.py's; tune.py checks REPORT_FILES before the search (a file this project did not write is
replaced only with --overwrite).
"""

import math

import optuna
from optuna.trial import TrialState

from ddp_tools.common import tool_files
from ddp_tools.tune import tune_space

STATE_NAMES = {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned",
               TrialState.FAIL: "fail", TrialState.RUNNING: "running", TrialState.WAITING: "waiting"}
MIN_TRIALS_FOR_IMPORTANCE = 4   # fewer complete trials than this give importances of noise
PLOT_DPI = 90
PLOTS = ("history.png", "importances.png", "slice.png")
REPORT_FILES = ("trials.md", "best.ini") + PLOTS
WRITER = "tune.py --study-dir"  # who wrote the report, in the output registry


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def trials_table(study, objective_name, param_names):
    """The Markdown table of all trials: number, parameters, objective, state, wall time."""
    header = ["trial"] + param_names + [objective_name, "state", "wall s"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    best = _best_number(study)
    for t in study.trials:
        state = STATE_NAMES.get(t.state, t.state.name.lower())
        if t.state == TrialState.PRUNED and "pruned_at" in t.user_attrs:
            last = t.intermediate_values.get(t.user_attrs["pruned_at"])
            state += f" at {t.user_attrs['pruned_at']} ({_cell(last)})"
        elif t.state == TrialState.FAIL:
            state += f" ({t.user_attrs.get('fail_reason', 'interrupted')})"
        number = f"**{t.number}**" if t.number == best else str(t.number)
        row = ([number] + [_cell(t.params.get(n)) for n in param_names]
               + [_cell(t.value), state, _cell(t.user_attrs.get("wall_s"))])
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _best_number(study):
    try:
        return study.best_trial.number
    except ValueError:                      # no complete trial
        return None


def write_text(path, text):
    tool_files.write_text_atomic(str(path), str(path), text, WRITER)


def write_best_ini(study, path, objective_name, trial_args):
    """best.ini: the best trial's parameters; the shared trial arguments as a comment."""
    best = study.best_trial
    lines = [f"# launch/tune.py: trial {best.number} of study '{study.study_name}', "
             f"{objective_name} {best.value:.6g}",
             "# the arguments every trial had: " + " ".join(trial_args)]
    lines += [f"{name} = {tune_space.format_value(value)}" for name, value in best.params.items()]
    write_text(path, "\n".join(lines) + "\n")


def write_plots(study, out_dir, objective_name):
    """The PNGs; returns their file names. Plots need at least one complete trial."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as ovm
    import warnings
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    params = {n for t in complete for n in t.params}
    plots = [("history.png", lambda: ovm.plot_optimization_history(study, target_name=objective_name))]
    if len(params) >= 2 and len(complete) >= MIN_TRIALS_FOR_IMPORTANCE:
        plots.append(("importances.png", lambda: ovm.plot_param_importances(study)))
    else:
        plots.append(("slice.png", lambda: ovm.plot_slice(study, target_name=objective_name)))
    for stale in PLOTS:   # an earlier run's choice
        tool_files.remove_output(str(out_dir / stale), str(out_dir / stale))
    written = []
    for name, draw in plots:
        with warnings.catch_warnings():
            # Optuna's matplotlib plots are "experimental", and a one-point slice
            # axis or its colour bar makes matplotlib warn: neither is the user's concern.
            warnings.simplefilter("ignore")
            ax = draw()
            fig = ax.flat[0].figure if hasattr(ax, "flat") else ax.figure
            if name == "slice.png":   # its colour bar is not tight_layout's: widen instead
                fig.set_size_inches(1.0 + 3.4 * max(1, len(params)), 4.2)
            else:
                fig.set_size_inches(7, 4.2)
                fig.tight_layout()
            path = str(out_dir / name)
            tool_files.write_atomic(path, path, lambda f: fig.savefig(f, format="png", dpi=PLOT_DPI,
                                                                      bbox_inches="tight"), WRITER, binary=True)
        plt.close(fig)
        written.append(name)
    return written
