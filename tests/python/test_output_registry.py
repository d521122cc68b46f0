#!/usr/bin/python3
"""test_output_registry.py: issue 47's rule for the outputs of the launch/ Python
tools: an output replaces only what this project wrote.

The registry itself (launch/ddp_tools/common/output_registry.py, the twin of
trainer/io/output_registry.h): where it lives, what matches a record (the same
inode, size and modification time; an append-only output's inode and path while
it only grows), the last record winning, torn and foreign lines skipped, a
record after a torn last line kept, a line as the C++ side writes it read,
compaction past its threshold (patched small here) keeping only live entries,
devices and pipes not recorded, a registry that cannot be written one note.

The tools (merge_traces, scaling_model, and plot_metrics and plot_sweep where
matplotlib is installed): a user's non-empty file at an output path is refused,
exit 2 in one line, and left byte for byte; --overwrite replaces it and says
so; the tool's own earlier output is replaced with a line naming its writer; an
output edited since (one byte appended) is refused again; an empty file is
replaced; an output that is an input stays refused under --overwrite; a torn
registry line does not hide a record; a registry that cannot be written costs
one note and the tool still succeeds; without HOME and XDG_STATE_HOME every
existing file needs --overwrite.

Every test has its own registry (XDG_STATE_HOME in a fresh temporary
directory): none reads or writes the user's ~/.local/state.

  PYTHONPATH=launch /usr/bin/python3 tests/python/test_output_registry.py

Exits 77 (ctest's SKIP_RETURN_CODE) when matplotlib is missing, after running
the tests that do not need it, whose failures still fail it.
"""
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from ddp_tools.common import output_registry

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.normpath(os.path.join(HERE, "..", "..", "launch"))
FIXTURE = os.path.join(HERE, "fixtures", "trace_mlp_1rank.json")
SKIP = 77
TIMEOUT_S = 60
HAVE_MATPLOTLIB = subprocess.run([sys.executable, "-c", "import matplotlib"], capture_output=True).returncode == 0
METRICS = "".join('{"event": "step", "step": %d, "loss": %g, "loss_scale": 65536, "lr": 0.05}\n' % (s, 2.0 / s)
                  for s in range(1, 6))
SWEEP = "mode,ranks,samples_per_s,efficiency\nstrong,1,100,1\nstrong,2,180,0.9\n"
REFUSED = "not a file ddp_train wrote"


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class RegistryTest(unittest.TestCase):
    """A scratch directory and a registry of the test's own (XDG_STATE_HOME)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="test_output_registry_")
        self.dir = self.tmp.name
        self.saved_env = {k: os.environ.get(k) for k in ("XDG_STATE_HOME", "HOME")}
        os.environ["XDG_STATE_HOME"] = self.path("state")
        self.registry = self.path("state/ddp_train/outputs.jsonl")
        self.saved_compact = output_registry.COMPACT_BYTES
        output_registry._noted = False  # the note is once per process: once per test here

    def tearDown(self):
        output_registry.COMPACT_BYTES = self.saved_compact
        for key, value in self.saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, data, mode="w"):
        with open(self.path(name), mode + ("b" if isinstance(data, bytes) else "")) as f:
            f.write(data)
        return self.path(name)

    def registry_lines(self):
        with open(self.registry) as f:
            return f.read().splitlines()


class Registry(RegistryTest):
    def test_where_the_registry_is(self):
        self.assertEqual(output_registry.registry_path(), self.registry)
        os.environ["HOME"] = self.path("home")
        for state in ("", "relative/state"):  # unset-like and not absolute: HOME's
            os.environ["XDG_STATE_HOME"] = state
            self.assertEqual(output_registry.registry_path(), self.path("home/.local/state/ddp_train/outputs.jsonl"))
        del os.environ["XDG_STATE_HOME"]
        os.environ["HOME"] = ""
        self.assertIsNone(output_registry.registry_path())
        out = self.write("out.txt", "ours\n")
        output_registry.record_output(out, "test")  # nowhere to record: nothing, no note
        self.assertIsNone(output_registry.owner_of(out))

    def test_a_record_matches_until_the_file_changes(self):
        out = self.write("out.txt", "ours\n")
        output_registry.record_output(out, "test.py --out")
        record = output_registry.owner_of(out)
        self.assertEqual(record["writer"], "test.py --out")
        self.assertEqual(record["path"], os.path.realpath(out))
        self.assertRegex(record["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(list(json.loads(self.registry_lines()[0])),
                         ["dev", "ino", "size", "mtime_ns", "path", "writer", "time"])
        os.symlink(out, self.path("link.txt"))
        self.assertIsNotNone(output_registry.owner_of(self.path("link.txt")), "a symlink is its file's")
        shutil.copy2(out, self.path("copy.txt"))
        self.assertIsNone(output_registry.owner_of(self.path("copy.txt")), "a copy is a new inode")
        st = os.stat(out)
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
        self.assertIsNone(output_registry.owner_of(out), "touched since")
        output_registry.record_output(out, "test.py --out")
        self.write("out.txt", b"!", mode="a")
        self.assertIsNone(output_registry.owner_of(out), "one byte appended")
        self.assertIsNone(output_registry.owner_of(self.path("missing.txt")))
        self.assertIsNone(output_registry.owner_of(self.dir), "a directory is no output")

    def test_an_append_only_output_stays_ours_while_it_only_grows(self):
        # As ddp_train records --metrics ("append": true, at its first line): a run killed
        # later left more lines, and its file is still its own, also after a compaction.
        out = self.write("m.jsonl", '{"event": "step"}\n')
        output_registry.record_output(out, "ddp_train --metrics", append=True)
        self.assertTrue(json.loads(self.registry_lines()[0])["append"])
        self.write("m.jsonl", '{"event": "step"}\n', mode="a")
        self.assertIsNotNone(output_registry.owner_of(out), "grown since its record")
        output_registry.COMPACT_BYTES = 1
        output_registry.record_output(self.write("other.txt", "x"), "test")  # compacts
        self.assertIsNotNone(output_registry.owner_of(out), "the compaction kept the grown file's record")
        with open(out, "r+") as f:
            f.truncate(5)
        self.assertIsNone(output_registry.owner_of(out), "shorter than recorded")

    def test_a_record_after_a_torn_last_line_is_kept(self):
        first = self.write("first.txt", "x")
        output_registry.record_output(first, "test")
        with open(self.registry, "a") as f:
            f.write('{"ino": 12, "si')  # a write cut short: no newline
        second = self.write("second.txt", "y")
        output_registry.record_output(second, "test")
        self.assertIsNotNone(output_registry.owner_of(second))

    def test_the_last_record_wins_and_torn_or_foreign_lines_are_skipped(self):
        out = self.write("out.txt", "ours\n")
        os.makedirs(os.path.dirname(self.registry))
        with open(self.registry, "w") as f:
            f.write("not JSON\n[1, 2]\n{\"dev\": \"7\"}\n\n")
        output_registry.record_output(out, "first")
        output_registry.record_output(out, "second")
        st = os.stat(out)
        stamp = {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        with open(self.registry, "a") as f:
            f.write(json.dumps(dict(stamp, dev=True)) + "\n")  # a boolean is no device number
            f.write(json.dumps(dict(stamp, writer="torn"))[:40])  # a writer killed mid-line
        self.assertEqual(output_registry.owner_of(out)["writer"], "second")

    def test_a_line_as_the_cpp_side_writes_it_is_read(self):
        out = self.write("metrics.jsonl", METRICS)
        st = os.stat(out)
        os.makedirs(os.path.dirname(self.registry))
        with open(self.registry, "w") as f:  # nlohmann::json::dump: keys sorted, no spaces
            f.write(json.dumps({"dev": st.st_dev, "ino": st.st_ino, "mtime_ns": st.st_mtime_ns, "path": out,
                                "size": st.st_size, "time": "2026-12-07T17:30:00Z",
                                "writer": "ddp_train --metrics"}, sort_keys=True, separators=(",", ":")) + "\n")
        self.assertEqual(output_registry.owner_of(out)["writer"], "ddp_train --metrics")

    def test_compaction_keeps_only_live_entries_the_last_per_inode(self):
        gone, edited, kept = (self.write(name, name + "\n") for name in ("gone.txt", "edited.txt", "kept.txt"))
        os.makedirs(os.path.dirname(self.registry))
        with open(self.registry, "w") as f:
            f.write("a torn line\n")
        for path in (gone, edited, kept):
            output_registry.record_output(path, "first")
        self.assertEqual(len(self.registry_lines()), 4)
        output_registry.COMPACT_BYTES = os.path.getsize(self.registry)  # the next append compacts
        os.unlink(gone)
        self.write("edited.txt", b"!", mode="a")
        output_registry.record_output(kept, "second")
        lines = [json.loads(line) for line in self.registry_lines()]
        self.assertEqual([(os.path.basename(r["path"]), r["writer"]) for r in lines], [("kept.txt", "second")])
        self.assertEqual(output_registry.owner_of(kept)["writer"], "second")
        fresh = self.write("fresh.txt", "fresh\n")
        output_registry.record_output(fresh, "third")  # two lines: under the threshold, appended
        self.assertEqual(len(self.registry_lines()), 2)
        self.assertEqual(output_registry.owner_of(fresh)["writer"], "third")

    def test_devices_and_pipes_are_not_recorded(self):
        os.mkfifo(self.path("fifo"))
        for path in ("/dev/null", self.path("fifo")):
            output_registry.record_output(path, "test")
        self.assertFalse(os.path.exists(self.registry) and self.registry_lines(), "a device or a FIFO recorded")

    def test_a_registry_that_cannot_be_written_is_one_note(self):
        blocker = self.write("state-file", "not a directory\n")
        os.environ["XDG_STATE_HOME"] = blocker  # ddp_train/ cannot be made under a file, even by root
        out = self.write("out.txt", "ours\n")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            output_registry.record_output(out, "test")
            output_registry.record_output(out, "test")
        self.assertEqual(len(err.getvalue().splitlines()), 1, err.getvalue())
        self.assertRegex(err.getvalue(), r"^note: cannot record .*out\.txt in .*state-file/ddp_train/outputs\.jsonl "
                                         r"\(.+\): a later run will ask for --overwrite to replace it\n$")
        self.assertIsNone(output_registry.owner_of(out))


def run_tool(script, *args, env=None):
    return subprocess.run([sys.executable, os.path.join(LAUNCH, script)] + list(args), capture_output=True,
                          text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL, env=env)


class ToolOutputs(RegistryTest):
    """The rule through each tool's own flags. cases(): (name, argv, output) per tool."""

    def setUp(self):
        super().setUp()
        with open(FIXTURE) as f:
            self.trace = self.write("run.rank0.json", f.read())
        self.metrics = self.write("m.jsonl", METRICS)
        self.sweep = self.write("sweep.csv", SWEEP)
        os.mkdir(self.path("po"))
        os.mkdir(self.path("ps"))

    def cases(self):
        cases = [("merge_traces.py -o", ["merge_traces.py", self.trace, "-o", self.path("merged.json")],
                  self.path("merged.json"), "merge_traces.py --output"),
                 ("scaling_model.py --csv", ["scaling_model.py", "--trace", self.trace, "--ranks", "1,2", "--csv",
                                             self.path("m.csv")], self.path("m.csv"), "scaling_model.py --csv"),
                 ("scaling_model.py --md", ["scaling_model.py", "--synthetic", "gpt2-124m", "--ranks", "1,2",
                                            "--md", self.path("m.md")], self.path("m.md"), "scaling_model.py --md"),
                 ("scaling_model.py --projection", ["scaling_model.py", "--projection", self.path("p.md")],
                  self.path("p.md"), "scaling_model.py --projection")]
        if HAVE_MATPLOTLIB:
            cases += [("plot_metrics.py -o", ["plot_metrics.py", self.metrics, "-o", self.path("po"), "--panels", "lr"],
                       self.path("po/lr.png"), "plot_metrics.py -o"),
                      ("plot_sweep.py -o", ["plot_sweep.py", self.sweep, "-o", self.path("ps")],
                       self.path("ps/sweep_efficiency.png"), "plot_sweep.py -o")]
        return cases

    def assert_refused(self, done, *words):
        self.assertEqual(done.returncode, 2, done.stderr)
        lines = [l for l in done.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, done.stderr)
        for word in words:
            self.assertIn(word, lines[0])

    def test_a_users_file_is_refused_and_overwrite_replaces_it(self):
        for name, argv, out, _ in self.cases():
            with self.subTest(name):
                self.write(out, "my notes\n")
                before = digest(out)
                self.assert_refused(run_tool(*argv), os.path.basename(out), REFUSED, self.registry, "--overwrite")
                self.assertEqual(digest(out), before, "a refused output changed")
                done = run_tool(*argv, "--overwrite")
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertIn(f"replacing {out} (--overwrite)", done.stderr)
                self.assertNotEqual(digest(out), before, "--overwrite did not replace it")

    def test_its_own_output_is_replaced_and_said_until_edited(self):
        for name, argv, out, writer in self.cases():
            with self.subTest(name):
                done = run_tool(*argv)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertNotIn("replacing", done.stderr)
                first = os.stat(out).st_ino
                done = run_tool(*argv)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertRegex(done.stderr, rf": replacing {re.escape(out)} \(written by {re.escape(writer)} "
                                              rf"at \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)")
                self.assertNotEqual(os.stat(out).st_ino, first, "not written anew")
                self.write(out, b"\n", mode="a")  # the user's edit: no longer what was recorded
                before = digest(out)
                self.assert_refused(run_tool(*argv), os.path.basename(out), REFUSED)
                self.assertEqual(digest(out), before)

    def test_an_empty_file_is_replaced_without_a_word(self):
        for name, argv, out, _ in self.cases():
            with self.subTest(name):
                self.write(out, "")
                done = run_tool(*argv)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertNotIn("replacing", done.stderr)
                self.assertGreater(os.path.getsize(out), 0)

    def test_a_torn_registry_line_does_not_hide_a_record(self):
        name, argv, out, writer = self.cases()[0]
        self.assertEqual(run_tool(*argv).returncode, 0)
        with open(self.registry, "a") as f:
            f.write('{"dev": 1, "ino": 2, "size"')  # a recorder killed mid-write
        done = run_tool(*argv)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(f"(written by {writer} at", done.stderr)

    def test_overwrite_does_not_lift_the_input_rule(self):
        before = digest(self.trace)
        self.assert_refused(run_tool("merge_traces.py", self.trace, "-o", self.trace, "--overwrite"),
                            "one of the inputs")
        self.assert_refused(run_tool("scaling_model.py", "--trace", self.trace, "--csv", self.path("x"), "--md",
                                     self.path("x"), "--overwrite"), "also --csv")
        self.assertEqual(digest(self.trace), before)

    def test_a_file_ddp_train_recorded_is_replaced_by_a_tool(self):
        out = self.write("merged.json", METRICS)  # as if ddp_train --metrics had written it
        st = os.stat(out)
        os.makedirs(os.path.dirname(self.registry))
        with open(self.registry, "w") as f:
            f.write(json.dumps({"dev": st.st_dev, "ino": st.st_ino, "mtime_ns": st.st_mtime_ns, "path": out,
                                "size": st.st_size, "time": "2026-12-07T17:30:00Z",
                                "writer": "ddp_train --metrics"}, sort_keys=True, separators=(",", ":")) + "\n")
        done = run_tool("merge_traces.py", self.trace, "-o", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(f"replacing {out} (written by ddp_train --metrics at 2026-12-07T17:30:00Z)", done.stderr)

    def test_a_registry_that_cannot_be_written_is_one_note_and_the_tool_succeeds(self):
        env = dict(os.environ, XDG_STATE_HOME=self.write("state-file", "not a directory\n"))
        for name, argv, out, _ in self.cases():
            with self.subTest(name):
                done = run_tool(*argv, env=env)
                self.assertEqual(done.returncode, 0, done.stderr)
                notes = [l for l in done.stderr.splitlines() if l.startswith("note: cannot record")]
                self.assertEqual(len(notes), 1, done.stderr)
                self.assertIn("a later run will ask for --overwrite", notes[0])
                self.assertGreater(os.path.getsize(out), 0)
                # Unrecorded, so the next run asks for --overwrite.
                self.assert_refused(run_tool(*argv, env=env), REFUSED, "--overwrite")

    def test_without_a_registry_every_existing_file_needs_overwrite(self):
        env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_STATE_HOME")}
        name, argv, out, _ = self.cases()[0]
        self.assertEqual(run_tool(*argv, env=env).returncode, 0)
        self.assert_refused(run_tool(*argv, env=env), REFUSED, "neither XDG_STATE_HOME nor HOME is set")
        self.assertEqual(run_tool(*argv, "--overwrite", env=env).returncode, 0)


def main():
    result = unittest.main(exit=False, verbosity=2).result
    if not result.wasSuccessful():
        return 1
    if not HAVE_MATPLOTLIB:
        print(f"SKIP (the other tests passed): matplotlib is not installed for {sys.executable}")
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
