"""output_registry.py: which existing files this project wrote, so that an
output replaces only what ddp_train or one of its tools wrote itself, and a
file it did not write is never replaced without --overwrite.

Its C++ twin is trainer/io/output_registry.h (.cpp): both read and write the
same file, so keep them in step.

A file's content cannot say who wrote it (a user's notes may start like our
table), so the writer remembers instead. The registry is
  $XDG_STATE_HOME/ddp_train/outputs.jsonl    (XDG_STATE_HOME set and absolute)
  $HOME/.local/state/ddp_train/outputs.jsonl (else, HOME set and non-empty)
and otherwise there is none (nothing is recorded, nothing found). It holds
one JSON object a line:
  {"dev": D, "ino": I, "size": S, "mtime_ns": M, "path": "/real/path",
   "writer": "plot_metrics.py -o", "time": "2026-12-07T17:30:00Z"}
(readers depend on neither key order nor spacing; "append": true marks an
append-only output, ddp_train's --metrics). A file is "ours" while it is
still what was recorded: the same inode, size and modification time (from
stat, following links; the device number is not compared, since an NFS or
Lustre mount's differs from node to node); an append-only output while the
file at its recorded path has the recorded inode and has only grown since.
A file edited since, copied (a new inode) or made by anyone else is not.

Every access locks outputs.lock beside the registry (flock: LOCK_EX to
append one line in one write, after a newline if the last line was left
torn; LOCK_SH to read). When an append leaves the registry larger than
COMPACT_BYTES it is rewritten (a temporary file renamed over it) with only
the lines whose files still match, the last per (inode, path), the newest
MAX_ENTRIES of them. Devices and pipes are not recorded. A registry that
cannot be written (read-only home, full disk) costs one note on stderr per
process: a later run will ask for --overwrite to replace that output.

owner_of(path): the last record matching the regular file now at path;
lines that do not parse (a torn line) or lack the integer keys are skipped.

Standard library only, Python >= 3.6.
"""
import fcntl
import json
import os
import stat
import sys
import time

# An append that leaves the registry larger than this compacts it; a
# compaction keeps at most MAX_ENTRIES live lines (the newest).
COMPACT_BYTES = 1 << 20
MAX_ENTRIES = 2000
STAMP_KEYS = ("ino", "size", "mtime_ns")
# Where the registry would be, for messages when there is none.
NO_REGISTRY = "a registry: neither XDG_STATE_HOME nor HOME is set"

_noted = False  # the one note per process of a record that failed


def registry_path():
    """The registry file, or None where neither XDG_STATE_HOME (absolute) nor HOME is set."""
    state = os.environ.get("XDG_STATE_HOME", "")
    if state and os.path.isabs(state):
        return os.path.join(state, "ddp_train", "outputs.jsonl")
    home = os.environ.get("HOME", "")
    if home:
        return os.path.join(home, ".local", "state", "ddp_train", "outputs.jsonl")
    return None


def _stamp(st):
    return st.st_ino, st.st_size, st.st_mtime_ns


def _entry(parsed):
    """(ino, size, mtime_ns, path, append) of a parsed line; None for a foreign or torn one."""
    if not isinstance(parsed, dict):
        return None
    values = tuple(parsed.get(key) for key in STAMP_KEYS)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    if not isinstance(parsed.get("path"), str):
        return None
    return values + (parsed["path"], parsed.get("append") is True)


def _matches(entry, now, real):
    """Whether the file now at real (stamp now) is what entry recorded (the module's doc)."""
    ino, size, mtime_ns, path, append = entry
    if ino != now[0]:
        return False
    if append:
        return path == real and size <= now[1] and mtime_ns <= now[2]
    return (size, mtime_ns) == now[1:]


def _lines(data):
    """(parsed, line) for every line of the registry's bytes that parses as JSON."""
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            yield json.loads(line.decode("utf-8")), line
        except (ValueError, RecursionError):  # a torn line, or not ours
            continue


def _note(path, registry, why):
    global _noted
    if not _noted:
        _noted = True
        print("note: cannot record %s in %s (%s): a later run will ask for --overwrite to replace it" %
              (path, registry, why), file=sys.stderr)


class _Lock:
    """outputs.lock beside the registry, locked while in a with block (unlocked
    where the lock file cannot be opened: a reader then skips a torn line)."""

    def __init__(self, registry, operation):
        self.path, self.operation, self.fd = os.path.join(os.path.dirname(registry), "outputs.lock"), operation, None

    def __enter__(self):
        for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
            try:
                self.fd = os.open(self.path, flags, 0o644)
                break
            except OSError:
                continue
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, self.operation)
            except OSError:
                pass  # no locks here (some NFS)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)  # the lock goes with it


def record_output(path, writer, append=False):
    """Records the complete regular file at path (through links) as written by
    writer ("plot_metrics.py -o"); append: an append-only output. Never raises
    for the registry's sake: a failure is one note per process. A device or a
    pipe is not recorded."""
    registry = registry_path()
    try:
        st = os.stat(path)
    except OSError as e:
        _note(path, registry or "a registry", e.strerror)
        return
    if not stat.S_ISREG(st.st_mode):
        return
    if registry is None:
        _note(path, "a registry", "neither XDG_STATE_HOME nor HOME is set")
        return
    entry = {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
             "path": os.path.realpath(path), "writer": writer,
             "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if append:
        entry["append"] = True
    line = (json.dumps(entry, separators=(", ", ": ")) + "\n").encode("ascii")  # json.dumps escapes the rest
    directory = os.path.dirname(registry)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        with _Lock(registry, fcntl.LOCK_EX):
            _append(registry, line)
            if os.stat(registry).st_size > COMPACT_BYTES:
                _compact(registry)
    except OSError as e:
        _note(path, registry, e.strerror or str(e))


def _append(registry, line):
    """line appended in one write, after a newline if the last line was left torn."""
    fd = os.open(registry, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        written = os.write(fd, line)
        if written != len(line):
            raise OSError(0, "wrote %d of the line's %d bytes" % (written, len(line)))
    finally:
        os.close(fd)


def _compact(registry):
    """Rewrites the locked registry with only its live lines, the last per
    (inode, path), the newest MAX_ENTRIES: to a temporary file renamed over it,
    so a crash or a full disk leaves the old registry whole."""
    with open(registry, "rb") as f:
        data = f.read()
    last = {}  # (ino, path) -> line; dicts keep insertion order, so re-insert to move it last
    for parsed, line in _lines(data):
        entry = _entry(parsed)
        if entry is None:
            continue
        try:
            now = _stamp(os.stat(entry[3]))
        except (OSError, ValueError):  # gone, or a path with a NUL
            continue
        if not _matches(entry, now, entry[3]):
            continue
        last.pop((entry[0], entry[3]), None)
        last[(entry[0], entry[3])] = line
    kept = list(last.values())[-MAX_ENTRIES:]
    temp = "%s.tmp.%d" % (registry, os.getpid())
    try:
        with open(temp, "wb") as f:
            f.write(b"".join(line + b"\n" for line in kept))
        os.replace(temp, registry)
    except OSError:
        if os.path.exists(temp):
            os.unlink(temp)


def owner_of(path):
    """The last record (a dict: "writer" and "time" as recorded) matching the
    regular file now at path, else None."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    registry = registry_path()
    if not stat.S_ISREG(st.st_mode) or registry is None:
        return None
    now, real = _stamp(st), os.path.realpath(path)
    try:
        with _Lock(registry, fcntl.LOCK_SH):
            with open(registry, "rb") as f:
                data = f.read()
    except OSError:
        return None
    found = None
    for parsed, _ in _lines(data):
        entry = _entry(parsed)
        if entry is not None and _matches(entry, now, real):
            found = parsed
    return found
