"""tool_files.py: how the launch/ Python tools read their input files and write
their output files, so that a careless path can neither hang them, fill the
memory, nor cost the user a file.

Inputs are regular files under a size cap, read once: open() of a FIFO blocks
until a writer comes, and /dev/zero or a sparse multi-GB file would be read
into memory whole before any parser could object.

Outputs are checked before anything is written (check_outputs), and refused
when one is
  - one of the inputs (the same file by device and inode, so also when named
    through ./, a symlink or a hard link), or another of the outputs;
  - a directory, a socket or a block device, or in a directory that does not
    exist;
  - an existing non-empty regular file that this project did not write: one
    is replaced only while the provenance registry (output_registry.py,
    shared with ddp_train) records it as written by ddp_train or one of its
    tools and it is unchanged since, and the tool says so on stderr
    ("<label>: replacing <path> (written by <writer> at <time>)"); anyone
    else's file (a user's notes where a CSV would go, a file edited since it
    was written) only with the tool's --overwrite, said as well. An empty
    file holds nothing to lose. --overwrite never lifts the first rule.
A character device (/dev/null) and a pipe with a reader (`--csv /dev/stdout
| head`) are written in place and not recorded; a FIFO with no reader is
refused rather than waited on. Anything else is written to a temporary file
of a unique name next to its target (never a fixed OUT.tmp, which may be the
user's file), then renamed over it and recorded in the registry with its
writer ("plot_metrics.py -o"): an interrupted or failed write leaves the
earlier file, or nothing. A symlinked output keeps its link and replaces the
file it points to; the new file keeps the old one's permission bits, but is a
new inode: a hard link to the old file keeps the old content, and the owner
is whoever runs the tool. A file a tool writes as it runs (a log) is opened
with open_output and recorded when closed (or at exit): one left by a killed
run is not recorded, and a later run asks for --overwrite to replace it.
write_atomic and open_output apply the same rule themselves to a file that
check_outputs did not clear, so no write of a tool replaces a foreign file
even where a check was forgotten.

Errors are FileError, whose message is one line naming the file. Standard
library only, Python >= 3.6 (scaling_sweep.py's floor).
"""
import atexit
import errno
import os
import stat
import sys
import tempfile

from ddp_tools.common import output_registry

MIB = 1 << 20
# Traces and metrics files: a --trace window of thousands of steps, or the
# metrics of a --log-every 1 run of a million steps (about 250 bytes a
# record), stays below this.
LARGE_INPUT_BYTES = 1024 * MIB
# Cluster files, bench tables, CSVs: a few KB in practice.
SMALL_INPUT_BYTES = 64 * MIB
OVERWRITE_HELP = "replace an existing output file that this program did not write"

# The (dev, ino, size, mtime_ns) of existing files this process may replace:
# cleared by check_outputs, or written by this process itself.
_cleared = set()


class FileError(Exception):
    """Bad input or output path: the message is one line naming the file."""


def _size_text(n):
    return "%.0f MiB" % (n / MIB) if n >= MIB else "%d bytes" % n


def check_input(path, label, limit=LARGE_INPUT_BYTES):
    """The os.stat of an input that is a regular file of at most limit bytes;
    FileError otherwise. label names it in messages ("--trace run.json")."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileError("%s: no such file" % label)
    except OSError as e:
        raise FileError("%s: cannot read it (%s)" % (label, e.strerror))
    if stat.S_ISDIR(st.st_mode):
        raise FileError("%s: is a directory, not a file" % label)
    if not stat.S_ISREG(st.st_mode):
        raise FileError("%s: not a regular file (a FIFO or a device is not read)" % label)
    if st.st_size > limit:
        raise FileError("%s: %s, over the %s limit for this input (not the file meant?)" %
                        (label, _size_text(st.st_size), _size_text(limit)))
    return st


def read_bytes(path, label, limit=LARGE_INPUT_BYTES):
    """The whole of a checked input (check_input), at most limit bytes even
    if it grows meanwhile."""
    check_input(path, label, limit)
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise FileError("%s: cannot read it (%s)" % (label, e.strerror))
    if len(data) > limit:
        raise FileError("%s: over the %s limit for this input" % (label, _size_text(limit)))
    return data


def read_text(path, label, limit=LARGE_INPUT_BYTES, what="text"):
    """read_bytes decoded as UTF-8; a binary file is '<label>: not <what>'."""
    try:
        return read_bytes(path, label, limit).decode("utf-8")
    except UnicodeDecodeError:
        raise FileError("%s: not %s (it holds bytes that are not UTF-8)" % (label, what))


def _identity(path):
    """(st_dev, st_ino) of an existing path (through symlinks), else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def add_overwrite_flag(parser):
    """The tools' --overwrite (args.overwrite), with one help text for all."""
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)


def check_outputs(outputs, inputs=(), overwrite=False):
    """Refuses (FileError) any output that must not be written, before the
    first is. outputs: (path, label) pairs; inputs: paths; overwrite: the
    tool's --overwrite (an existing file it did not write may be replaced)."""
    taken = {}  # identity or real path -> the label of the input or output that holds it
    for path in inputs:
        ident = _identity(path)
        if ident:
            taken[ident] = "one of the inputs (%s)" % path
    # What will be replaced is said once every output has passed: not before a refusal.
    replacing = [_check_output(path, label, overwrite, taken) for path, label in outputs]
    for line in replacing:
        _say(line)


def _check_output(path, label, overwrite, taken):
    """FileError if path must not be written; else the line saying what it replaces, or None."""
    replacing = None
    ident = _identity(path)
    real = os.path.realpath(path)
    for key in (ident, real):
        if key is not None and key in taken:
            raise FileError("%s: is %s; not writing over it" % (label, taken[key]))
    if ident is None:
        parent = os.path.dirname(real)
        if not os.path.isdir(parent):
            why = "is not a directory" if os.path.exists(parent) else "does not exist"
            raise FileError("%s: its directory %s %s" % (label, os.path.dirname(path) or ".", why))
    else:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise FileError("%s: is a directory; give a file name" % label)
        if stat.S_ISSOCK(st.st_mode):
            raise FileError("%s: is a socket, not a file to write" % label)
        if stat.S_ISBLK(st.st_mode):  # it would be renamed over: the device node gone
            raise FileError("%s: is a block device, not a file to write" % label)
        if stat.S_ISREG(st.st_mode):
            replacing = _may_replace(path, label, st, overwrite)
    if ident is not None:
        taken[ident] = "also %s" % label
    taken[real] = "also %s" % label
    return replacing


def _stamp(st):
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _may_replace(path, label, st, overwrite):
    """Whether the existing regular file at path (st: its os.stat) may be
    replaced: FileError if not; else the line to say so on stderr, or None
    (empty, or cleared already)."""
    if st.st_size == 0 or _stamp(st) in _cleared:
        return None
    record = output_registry.owner_of(path)
    if record is not None:
        line = "%s: replacing %s (written by %s at %s)" % (label, path, record.get("writer", "?"),
                                                          record.get("time", "?"))
    elif overwrite:
        line = "%s: replacing %s (--overwrite)" % (label, path)
    else:
        registry = output_registry.registry_path() or output_registry.NO_REGISTRY
        raise FileError("%s: exists and is not a file ddp_train wrote (no record of it in %s); not replacing it: "
                        "pass --overwrite or choose another path" % (label, registry))
    _cleared.add(_stamp(st))
    return line


def _say(line):
    if line:
        print(line, file=sys.stderr)


def _existing_regular(path):
    """The os.stat of the regular file at path (through links), else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def record(path, writer):
    """Records the complete file at path as written by writer, in the registry
    and for this process (which may write it again even where the registry
    cannot be written). write_atomic and open_output call it; a tool calls it
    for an output it had another process write (a ddp_train run's --metrics,
    a Slurm job's log)."""
    output_registry.record_output(path, writer)
    st = _existing_regular(path)
    if st is not None:
        _cleared.add(_stamp(st))


def write_atomic(path, label, write, writer, binary=False):
    """Calls write(f) with f a new file that becomes path once write returns
    (see the module's doc), recorded as written by writer ("zero_table.py
    --out"); FileError when it cannot be written or may not be replaced."""
    mode = "wb" if binary else "w"
    try:
        # Devices and pipes by the name given: /dev/stdout resolves to
        # /proc/self/fd/1 and then to "pipe:[N]", which is no path.
        kind = os.stat(path).st_mode if os.path.exists(path) else 0
        if stat.S_ISCHR(kind):
            with open(path, mode) as f:  # /dev/null: nothing there to tear
                write(f)
            return
        if stat.S_ISFIFO(kind):
            _write_to_pipe(path, label, mode, write)
            return
        target = os.path.realpath(path)
        st = _existing_regular(target)
        if st is not None:
            _say(_may_replace(path, label, st, overwrite=False))
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix="." + os.path.basename(target) + ".",
                                   suffix=".tmp")
    except OSError as e:
        raise FileError("%s: cannot write it (%s)" % (label, e.strerror))
    try:
        os.chmod(tmp, _new_file_mode(target))
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        os.unlink(tmp)
        if isinstance(e, OSError):
            raise FileError("%s: cannot write it (%s)" % (label, e.strerror or e))
        raise
    record(target, writer)


def remove_output(path, label):
    """Removes an earlier output that this run no longer writes (a plot of
    another kind), under the rule that would let it be replaced: FileError
    for a file this project did not write, unless check_outputs cleared it.
    Nothing there, or something other than a regular file: left alone."""
    st = _existing_regular(path)
    if st is None:
        return
    _say(_may_replace(path, label, st, overwrite=False))
    try:
        os.unlink(path)
    except OSError as e:
        raise FileError("%s: cannot remove it (%s)" % (label, e.strerror))


class _OutputFile:
    """A file a tool writes as it runs (a log, a JSON Lines of runs): the
    file object's write, flush and fileno (a subprocess's stdout), recorded
    in the registry when closed, or at exit if still open."""

    def __init__(self, f, path, writer):
        self._f, self.path, self.writer = f, path, writer
        self.closed = False

    def write(self, data):
        return self._f.write(data)

    def flush(self):
        self._f.flush()

    def fileno(self):
        return self._f.fileno()

    def close(self):
        if self.closed:
            return
        self.closed = True
        _open_outputs.discard(self)
        self._f.close()
        record(self.path, self.writer)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_open_outputs = set()


@atexit.register
def _close_open_outputs():
    for f in list(_open_outputs):
        try:
            f.close()
        except OSError:
            pass


def open_output(path, label, writer, mode="w", **kwargs):
    """path opened for writing in place (open(path, mode, **kwargs)), for a
    file written as the tool runs; recorded as written by writer when closed.
    FileError when it cannot be opened or may not be replaced (check it with
    check_outputs first, with the tool's --overwrite)."""
    try:
        st = _existing_regular(path)
        if st is not None:
            _say(_may_replace(path, label, st, overwrite=False))
        f = _OutputFile(open(path, mode, **kwargs), path, writer)
    except OSError as e:
        raise FileError("%s: cannot write it (%s)" % (label, e.strerror))
    _open_outputs.add(f)
    return f


def _write_to_pipe(target, label, mode, write):
    """A FIFO or pipe is written in place when a reader has it open; without
    one, open() would block until one came: refused instead."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ENXIO:
            raise FileError("%s: a FIFO that no process reads; not waiting for one" % label)
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, mode) as f:
        write(f)


def _new_file_mode(target):
    """The replaced file's permissions, else what open() would give (mkstemp's are 0600)."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_text_atomic(path, label, text, writer):
    write_atomic(path, label, lambda f: f.write(text), writer)
