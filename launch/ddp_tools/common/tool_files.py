"""tool_files.py: how the launch/ Python tools read their input files and write
their output files, so that a careless path can neither hang them, fill the
memory, nor cost the user a file.

Inputs are regular files under a size cap, read once: open() of a FIFO blocks
until a writer comes, and /dev/zero or a sparse multi-GB file would be read
into memory whole before any parser could object.

Outputs are checked before anything is written, and refused when one is
  - one of the inputs (the same file by device and inode, so also when named
    through ./, a symlink or a hard link), or another of the outputs;
  - a directory or a socket, or in a directory that does not exist;
  - an existing non-empty file that is not the tool's kind of output (a
    user's notes where a CSV would go): an earlier run's output is replaced,
    as ddp_train replaces an earlier --save-weights file and refuses another.
A character device (/dev/null) and a pipe with a reader (`--csv /dev/stdout
| head`) are written in place; a FIFO with no reader is refused rather than
waited on. Anything else is written to a temporary file of a unique name
next to its target (never a fixed OUT.tmp, which may be the user's file),
then renamed over it: an interrupted or failed write leaves the earlier file,
or nothing. A symlinked output keeps its link and replaces the file it points
to; the new file keeps the old one's permission bits, but is a new inode: a
hard link to the old file keeps the old content, and the owner is whoever
runs the tool.

Errors are FileError, whose message is one line naming the file. Standard
library only, Python >= 3.6 (scaling_sweep.py's floor).
"""
import errno
import os
import stat
import tempfile

MIB = 1 << 20
# Traces and metrics files: a --trace window of thousands of steps, or the
# metrics of a --log-every 1 run of a million steps (about 250 bytes a
# record), stays below this.
LARGE_INPUT_BYTES = 1024 * MIB
# Cluster files, bench tables, CSVs: a few KB in practice.
SMALL_INPUT_BYTES = 64 * MIB
HEAD_BYTES = 4096  # what is read of an existing output to tell whose it is


class FileError(Exception):
    """Bad input or output path: the message is one line naming the file."""


class Kind:
    """What a tool writes, to tell an earlier run's output (replaced) from
    someone else's file (refused): a name for messages and a test of the
    file's first HEAD_BYTES bytes."""

    def __init__(self, name, test):
        self.name = name
        self.test = test


PNG = Kind("a PNG image", lambda head: head.startswith(b"\x89PNG\r\n\x1a\n"))


def text_kind(name, *prefixes):
    """A text output whose first line starts with one of prefixes."""
    return Kind(name, lambda head: any(head.startswith(p.encode()) for p in prefixes))


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


def check_outputs(outputs, inputs=()):
    """Refuses (FileError) any output that must not be written, before the
    first is. outputs: (path, label, Kind or None) triples; inputs: paths."""
    taken = {}  # identity or real path -> the label of the input or output that holds it
    for path in inputs:
        ident = _identity(path)
        if ident:
            taken[ident] = "one of the inputs (%s)" % path
    for path, label, kind in outputs:
        _check_output(path, label, kind, taken)


def _check_output(path, label, kind, taken):
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
        if stat.S_ISREG(st.st_mode) and kind is not None and st.st_size > 0 and not kind.test(_head(path)):
            raise FileError("%s: exists and is not %s; not replacing it (remove it or choose another name)" %
                            (label, kind.name))
    if ident is not None:
        taken[ident] = "also %s" % label
    taken[real] = "also %s" % label


def _head(path):
    try:
        with open(path, "rb") as f:
            return f.read(HEAD_BYTES).lstrip()
    except OSError:
        return b""


def write_atomic(path, label, write, binary=False):
    """Calls write(f) with f a new file that becomes path once write returns
    (see the module's doc); FileError when it cannot be written."""
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


def write_text_atomic(path, label, text):
    write_atomic(path, label, lambda f: f.write(text))
