"""merge_traces.py: merge the ranks' `ddp_train --trace` files into one Chrome trace.

    launch/merge_traces.py run.json -o merged.json            # run.rank0.json, run.rank1.json, ...
    launch/merge_traces.py run.json -o notes.json --overwrite # replace a file ddp_train did not write
    launch/merge_traces.py run.rank0.json run.rank1.json -o merged.json

Each rank becomes one process (pid = rank, named "rank R") with its two threads,
"compute" (tid 0) and "communication" (tid 1). The ranks' clocks are aligned at
the barrier every rank leaves when its trace window opens: each file's
otherData.clock_sync_ts becomes ts 0 (a rank's events before it get negative
times). Open the result in https://ui.perfetto.dev or chrome://tracing.

otherData of the result: {"format", "world_size", "aligned_at": "clock_sync_ts",
"ranks": [each file's otherData, in rank order]}.

Standard library only. Bad input (a missing or garbled file, ranks of different
runs, a rank missing or given twice, an output that is an input, or an existing
file that neither ddp_train nor one of its tools wrote, without --overwrite:
launch/ddp_tools/common/tool_files.py) is a one-line error and exit status 2. The
output is written whole or not at all (a temporary file renamed over it); an
earlier output of this project's is replaced, and a line on stderr says so.
"""

import argparse
import glob
import json
import os
import re
import sys

from ddp_tools.common import tool_files

FORMAT = "ddp_train trace 1"
WRITER = "merge_traces.py --output"  # who wrote the merged trace, in the output registry


class TraceError(Exception):
    pass


def rank_files(prefix):
    """run.json -> run.rank0.json, run.rank1.json, ... in rank order (what --trace run.json wrote)."""
    root, ext = os.path.splitext(prefix)
    if os.path.basename(root) == "" or ext == "":
        root, ext = prefix, ""
    pattern = re.compile(re.escape(os.path.basename(root)) + r"\.rank([0-9]+)" + re.escape(ext) + r"$")
    found = []
    for path in glob.glob(glob.escape(root) + ".rank*" + ext):
        m = pattern.match(os.path.basename(path))
        if m:
            found.append((int(m.group(1)), path))
    return [p for _, p in sorted(found)]


def load(path):
    try:
        doc = json.loads(tool_files.read_bytes(path, path))
    except tool_files.FileError as e:
        raise TraceError(str(e))
    except ValueError as e:  # UnicodeDecodeError included
        raise TraceError("%s: not JSON (%s)" % (path, e))
    other = doc.get("otherData") if isinstance(doc, dict) else None
    if not isinstance(other, dict) or other.get("format") != FORMAT:
        raise TraceError("%s: not a ddp_train trace (no otherData.format \"%s\")" % (path, FORMAT))
    if not isinstance(doc.get("traceEvents"), list):
        raise TraceError("%s: no traceEvents list" % path)
    for key in ("rank", "world_size", "clock_sync_ts"):
        if not _is_number(other.get(key)):
            raise TraceError("%s: otherData.%s is missing or not a number" % (path, key))
    for i, e in enumerate(doc["traceEvents"]):
        bad = _bad_event(e)
        if bad:
            raise TraceError("%s: traceEvents[%d] %s" % (path, i, bad))
    return doc


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _bad_event(e):
    """What is wrong with an event that merge() would shift, or None."""
    if not isinstance(e, dict):
        return "is not an object"
    if "ts" in e and not _is_number(e["ts"]):
        return "has a ts that is not a number"
    if isinstance(e.get("args"), dict) and "called_ts" in e["args"] and not _is_number(e["args"]["called_ts"]):
        return "has an args.called_ts that is not a number"
    return None


def merge(paths):
    docs = [load(p) for p in paths]
    world = int(docs[0]["otherData"]["world_size"])
    by_rank = {}
    for path, doc in zip(paths, docs):
        other = doc["otherData"]
        if int(other["world_size"]) != world:
            raise TraceError("%s: world size %d, but %s has %d: traces of different runs" %
                             (path, int(other["world_size"]), paths[0], world))
        rank = int(other["rank"])
        if rank in by_rank:
            raise TraceError("%s: rank %d given twice (also %s)" % (path, rank, by_rank[rank][0]))
        by_rank[rank] = (path, doc)
    missing = [r for r in range(world) if r not in by_rank]
    if missing:
        raise TraceError("rank(s) %s of %d missing: pass every rank's file (or the --trace name)" %
                         (",".join(str(r) for r in missing), world))
    events = []
    for rank in range(world):
        _, doc = by_rank[rank]
        shift = float(doc["otherData"]["clock_sync_ts"])
        for e in doc["traceEvents"]:
            e = dict(e)
            e["pid"] = rank
            if "ts" in e:
                e["ts"] = float(e["ts"]) - shift
            if isinstance(e.get("args"), dict) and "called_ts" in e["args"]:
                e["args"] = dict(e["args"], called_ts=float(e["args"]["called_ts"]) - shift)
            events.append(e)
    other = {"format": FORMAT + " merged", "world_size": world, "aligned_at": "clock_sync_ts",
             "ranks": [by_rank[r][1]["otherData"] for r in range(world)]}
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def main(argv):
    p = argparse.ArgumentParser(prog="merge_traces.py", description=__doc__.split("\n\n")[0],
                                epilog="Inputs: every rank's file, or the name given to --trace (its .rank<R> files "
                                       "are found next to it).")
    p.add_argument("inputs", nargs="+", metavar="TRACE", help="the ranks' trace files, or the --trace name")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the merged trace to write")
    tool_files.add_overwrite_flag(p)
    args = p.parse_args(argv)
    paths = []
    for item in args.inputs:
        if os.path.lexists(item):
            paths.append(item)  # load() says what is wrong with one that is not a trace file
        else:
            found = rank_files(item)
            if not found:
                print("merge_traces: %s: no such file, and no %s files next to it" %
                      (item, "<name>.rank<R><ext>"), file=sys.stderr)
                return 2
            paths += found
    label = "--output %s" % args.output
    try:
        tool_files.check_outputs([(args.output, label)], paths, args.overwrite)
        merged = merge(paths)
        tool_files.write_text_atomic(args.output, label, json.dumps(merged) + "\n", WRITER)
    except (TraceError, tool_files.FileError) as e:
        print("merge_traces: %s" % e, file=sys.stderr)
        return 2
    n = sum(1 for e in merged["traceEvents"] if e.get("ph") == "X")
    # On stderr: with -o /dev/stdout the merged trace alone is on stdout.
    print("merge_traces: %d ranks, %d events -> %s" % (merged["otherData"]["world_size"], n, args.output),
          file=sys.stderr)
    return 0


def cli():
    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(cli())
