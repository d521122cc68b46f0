"""tune_space.py: the search space and objective of launch/tune.py, checked before any trial.

A --param spec is NAME=KIND:SPEC with NAME a ddp_train flag without its dashes:
  log:LOW:HIGH    a float drawn on a log scale (0 < LOW < HIGH)
  float:LOW:HIGH  a float drawn uniformly (LOW < HIGH)
  int:LOW:HIGH    an integer in [LOW, HIGH] (LOW < HIGH)
  choice:A,B,...  one of the listed values (numbers stay numbers, the rest strings)
Everything here raises SpecError with a one-line message; tune.py prints it and exits 2.
"""

import math
import re
import subprocess

# The objective names, what the summary record calls them, and their direction.
# ddp_train's eval records call the validation split "test" (--data text's
# validation tokens too), so val_* are accepted as the same metrics.
OBJECTIVES = {
    "test_accuracy": ("test_accuracy", "maximize"),
    "val_accuracy": ("test_accuracy", "maximize"),
    "test_loss": ("test_loss", "minimize"),
    "val_loss": ("test_loss", "minimize"),
    "samples_per_s": ("samples_per_s", "maximize"),
}

# Flags that change how many samples one step sees: when one is searched, trials'
# step numbers are not comparable and intermediate values are reported per epoch.
BATCH_SHAPE_FLAGS = ("batch-size", "global-batch", "grad-accum")

# Flags tune.py sets for every trial itself.
RESERVED_FLAGS = ("metrics", "config", "help")


class SpecError(Exception):
    """Bad command-line input to tune.py: the message is the whole one-line error."""


class Param:
    """One searched flag: name (the flag without --), kind, and its range or choices."""

    def __init__(self, name, kind, low=None, high=None, choices=None):
        self.name, self.kind = name, kind
        self.low, self.high, self.choices = low, high, choices

    def suggest(self, trial):
        if self.kind == "log":
            return trial.suggest_float(self.name, self.low, self.high, log=True)
        if self.kind == "float":
            return trial.suggest_float(self.name, self.low, self.high)
        if self.kind == "int":
            return trial.suggest_int(self.name, self.low, self.high)
        return trial.suggest_categorical(self.name, self.choices)

    def coerce(self, text):
        """The value of an --enqueue entry, as suggest() would have returned it."""
        try:
            if self.kind in ("log", "float"):
                value = float(text)
                inside = self.low <= value <= self.high
            elif self.kind == "int":
                value = int(text)
                inside = self.low <= value <= self.high
            else:
                value = _choice_value(text)
                inside = value in self.choices
        except ValueError:
            raise SpecError(f"--enqueue: {self.name}={text!r} is not a {self.kind} value") from None
        if not inside:
            raise SpecError(f"--enqueue: {self.name}={text} is outside its --param range")
        return value


def _choice_value(text):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _number(text, cast, where):
    try:
        value = cast(text)
    except ValueError:
        raise SpecError(f"{where}: {text!r} is not {'an integer' if cast is int else 'a number'}") from None
    if not math.isfinite(value):
        raise SpecError(f"{where}: {text!r} is not finite")
    return value


def parse_param(spec):
    """One --param NAME=KIND:SPEC into a Param (the flag's existence is checked later)."""
    where = f"--param {spec}"
    name, eq, rest = spec.partition("=")
    name = name.strip().lstrip("-")
    kind, colon, body = rest.partition(":")
    if not eq or not name or not colon:
        raise SpecError(f"{where}: expected NAME=KIND:SPEC (e.g. lr=log:1e-4:1e-1)")
    if kind == "choice":
        choices = [c.strip() for c in body.split(",")]
        if not body.strip() or any(not c for c in choices):
            raise SpecError(f"{where}: empty choice (expected choice:A,B,...)")
        values = [_choice_value(c) for c in choices]
        if len(set(values)) != len(values):
            raise SpecError(f"{where}: a choice is listed twice")
        return Param(name, kind, choices=values)
    if kind not in ("log", "float", "int"):
        raise SpecError(f"{where}: unknown kind {kind!r} (log, float, int or choice)")
    bounds = body.split(":")
    if len(bounds) != 2:
        raise SpecError(f"{where}: expected {kind}:LOW:HIGH")
    cast = int if kind == "int" else float
    low, high = (_number(b.strip(), cast, where) for b in bounds)
    if kind == "log" and low <= 0:
        raise SpecError(f"{where}: a log range needs LOW > 0")
    if low >= high:
        raise SpecError(f"{where}: LOW must be below HIGH")
    return Param(name, kind, low, high)


def trainer_flags(help_text):
    """{flag: takes_a_value} from `ddp_train --help` (lines like '  --lr arg (=0.05)  ...')."""
    flags = {}
    for line in help_text.splitlines():
        match = re.match(r"^\s+(?:-\w \[ )?--([a-z0-9][a-z0-9-]*)(?: \])?(\s+arg\b)?", line)
        if match:
            flags[match.group(1)] = bool(match.group(2))
    return flags


def read_trainer_help(trainer_cmd):
    """The trainer's flags, from its --help (run without the launcher: it is one process)."""
    try:
        done = subprocess.run(trainer_cmd + ["--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SpecError(f"--trainer {trainer_cmd[-1]}: cannot run it ({err.__class__.__name__})") from None
    flags = trainer_flags(done.stdout)
    if done.returncode != 0 or "lr" not in flags:
        raise SpecError(f"--trainer {trainer_cmd[-1]}: its --help does not list ddp_train's flags")
    return flags


def flags_in_args(args):
    """The flag names (without --) that a trailing argument list sets."""
    return {a[2:].split("=", 1)[0] for a in args if a.startswith("--") and len(a) > 2}


def check_space(params, flags, trial_args):
    """Refuses a searched flag that ddp_train lacks, is a switch, is reserved, repeats or is fixed."""
    seen = set()
    fixed = flags_in_args(trial_args)
    for p in params:
        if p.name not in flags:
            raise SpecError(f"--param {p.name}: not a ddp_train flag (see ddp_train --help)")
        if not flags[p.name]:
            raise SpecError(f"--param {p.name}: a switch without a value cannot be searched")
        if p.name in RESERVED_FLAGS:
            raise SpecError(f"--param {p.name}: tune.py sets --{p.name} for each trial itself")
        if p.name in seen:
            raise SpecError(f"--param {p.name}: given twice")
        if p.name in fixed:
            raise SpecError(f"--param {p.name}: also given after -- (searched flags are set per trial)")
        seen.add(p.name)
    for name in RESERVED_FLAGS[:2]:
        if name in fixed:
            raise SpecError(f"--{name} after --: tune.py sets it for each trial itself")


def parse_enqueue(text, params):
    """--enqueue "lr=0.05,batch-size=128" into {name: value}; every name must be searched."""
    by_name = {p.name: p for p in params}
    values = {}
    for item in text.split(","):
        name, eq, value = item.partition("=")
        name = name.strip().lstrip("-")
        if not eq or not value.strip():
            raise SpecError(f"--enqueue {text}: expected NAME=VALUE,NAME=VALUE")
        if name not in by_name:
            raise SpecError(f"--enqueue {text}: {name} is not a searched --param")
        values[name] = by_name[name].coerce(value.strip())
    return values


def objective_metric(name, direction, trial_args):
    """(summary key, 'minimize'|'maximize') of --objective, refusing one the trials cannot write."""
    if name not in OBJECTIVES:
        raise SpecError(f"--objective {name}: not a metric (one of {', '.join(OBJECTIVES)})")
    key, natural = OBJECTIVES[name]
    if key == "test_accuracy" and _mse_loss(trial_args):
        raise SpecError(f"--objective {name}: an mse loss has no accuracy (use test_loss)")
    return key, direction or natural


def _mse_loss(args):
    """Whether the trials train with mse (given, or the default of --data synthetic)."""
    values = {}
    for i, a in enumerate(args):
        if a.startswith("--"):
            flag, eq, value = a[2:].partition("=")
            if not eq and i + 1 < len(args):
                value = args[i + 1]
            values[flag] = value
    return values.get("loss") == "mse" or (values.get("data") == "synthetic" and "loss" not in values)


def param_args(values):
    """The command-line flags of one trial's parameters."""
    args = []
    for name, value in values.items():
        args += [f"--{name}", format_value(value)]
    return args


def format_value(value):
    """A parameter value as ddp_train parses it (floats at full precision)."""
    return repr(value) if isinstance(value, float) else str(value)
