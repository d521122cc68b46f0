"""interpreter.py: a tool runs with the interpreter its dependencies were installed for.

launch/install_deps.sh and launch/install_hf_deps.sh install the tools'
dependencies (numpy, matplotlib, safetensors, tensorboard, optuna, tiktoken,
torch, transformers) for one interpreter, Debian's /usr/bin/python3 (PROVISIONED).
The entry points, though, start with whatever `python3` comes first: the
`#!/usr/bin/env python3` of `launch/<tool>.py`, or a user's `python3
launch/<tool>.py` / `python3 -m ddp_tools.<family>.<tool>`; under pyenv, conda
or an active venv that one has none of them (issue 47: tune.py said "optuna is
not installed" right after the installer installed it).

The one mechanism, here, called by the package's __init__ (so before any tool
module is imported, in every form: the launch/ scripts, `-m`, torch_gpt.py's
runpy): when the program being started is a ddp_tools tool and the running
interpreter lacks one of the modules its family uses (FAMILY_MODULES), ask
PROVISIONED which of them it has; if it has every one the running interpreter
has and more, re-execute the same command line with it (os.execv, silently: the
tool's own messages name sys.executable). Otherwise nothing changes. Why this
rather than a shebang naming /usr/bin/python3: a shebang is ignored by `python3
launch/x.py` and `-m`, and it would force Debian's interpreter on a host where
another python has the packages (the GPU host: PyTorch from pip in its own
python, no Debian packages; it runs `python3 launch/compare_torch.py`). The
"superset" rule never trades a module the user's interpreter has for one it
lacks, so such a host, a venv with `pip install -e 'launch[all]'`, or
/usr/bin/python3 itself run as before; a family without third-party modules
(traces, sweeps, checks) is never re-executed; imports by tests or other code
(not a tool started as a program) are left alone, as are the console scripts.
An interpreter older than the package supports (3.7, launch/pyproject.toml; a
`python` that is Python 2) re-executes any tool: this file and the package's
__init__ keep to syntax it can read, so that it gets that far.

DDP_TOOLS_PYTHON=/path/to/python names another provisioned interpreter (set it
to the interpreter you run to keep every tool on it).
"""
import os
import sys

PROVISIONED = "/usr/bin/python3"  # what launch/install_deps.sh and install_hf_deps.sh install for

# The third-party modules each family's tools import (launch/pyproject.toml's
# extras; tests/launch/test_python_interpreter.sh checks this table against the
# sources' imports). Families not named import only the standard library.
FAMILY_MODULES = {
    "scaling": ("matplotlib",),
    "plots": ("matplotlib", "tensorboard"),
    "tune": ("optuna", "matplotlib"),
    "torch_ref": ("torch", "numpy", "safetensors", "transformers", "tiktoken"),
    "tokenizer": ("tiktoken", "numpy"),
}

_GUARD = "DDP_TOOLS_REEXECUTED"  # set for the re-executed process only: never twice
_PROBE = "import sys, importlib.util as u; print(' '.join(m for m in sys.argv[1:] if u.find_spec(m)))"


def _launch_dir():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _command_line():
    """The interpreter's own arguments (sys.orig_argv from Python 3.10, else
    /proc/self/cmdline), or [] where neither is there."""
    if hasattr(sys, "orig_argv"):
        return list(sys.orig_argv)
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return [a.decode(sys.getfilesystemencoding() or "utf-8", "replace") if not isinstance(a, str) else a
                    for a in f.read().split(b"\0")[:-1]]
    except (IOError, OSError):
        return []


def tool_family():
    """The family of the tool this process was started as (launch/<tool>.py, or
    -m ddp_tools.<family>.<tool>), or None when it is not a tool's start."""
    if sys.argv and sys.argv[0] in ("-m", "-c"):  # -m: runpy imports the package before it sets argv[0]
        args = _command_line()[1:]
        while args and args[0].startswith("-"):
            a = args.pop(0)
            if a in ("-X", "-W"):  # their value is the next argument
                args = args[1:]
            elif a == "-c" or a.startswith("-c"):
                return None
            elif a == "-m" or a.startswith("-m"):
                parts = (a[2:] or (args[0] if args else "")).split(".")
                return parts[1] if len(parts) > 2 and parts[0] == "ddp_tools" else None
        return None
    if not sys.argv or not sys.argv[0].endswith(".py"):
        return None
    script = os.path.realpath(sys.argv[0])
    launch = os.path.realpath(_launch_dir())
    if os.path.dirname(script) != launch:
        return None
    name = os.path.basename(script)
    for family in sorted(os.listdir(os.path.join(launch, "ddp_tools"))):
        if os.path.isfile(os.path.join(launch, "ddp_tools", family, name)):
            return family
    return None


def _has(module):
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def reexec_if_needed():
    """Re-executes this tool's command line with the provisioned interpreter
    where that one has strictly more of its family's modules (see above)."""
    if os.environ.pop(_GUARD, None) is not None:
        return
    family = tool_family()
    if family is None:
        return
    python = os.environ.get("DDP_TOOLS_PYTHON") or PROVISIONED
    if os.path.abspath(sys.executable or "") == os.path.abspath(python) or not os.access(python, os.X_OK):
        return
    # An interpreter older than the package's (launch/pyproject.toml: 3.7; a
    # `python` that is Python 2) runs no tool: the provisioned one does.
    if sys.version_info >= (3, 7):
        modules = FAMILY_MODULES.get(family, ())
        here = {m for m in modules if _has(m)}
        if len(here) == len(modules):
            return
        import subprocess
        try:
            probe = subprocess.run([python, "-c", _PROBE] + sorted(modules), stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return
        there = set(probe.stdout.decode(errors="replace").split())
        if probe.returncode != 0 or not (there > here):
            return
    command = _command_line()
    if command:
        argv = [python] + command[1:]
    elif sys.argv[0] not in ("-m", "-c"):
        argv = [python] + sys.argv
    else:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.environ[_GUARD] = "1"
    try:
        os.execv(python, argv)
    except OSError:
        del os.environ[_GUARD]
