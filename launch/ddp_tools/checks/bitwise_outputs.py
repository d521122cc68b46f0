"""ddp_tools.checks.bitwise_outputs OLD_DIR NEW_DIR: whether two runs' outputs are the same
(launch/bitwise_compare.sh). Each directory holds w/ (--save-weights .npy
files), ck/ (--checkpoint-dir) and metrics.jsonl. Weight files must be equal
byte for byte; checkpoints equal in their tensors' bytes and in their
metadata except the run's random lineage id (run_id) and the checksum over
the metadata (crc32), and a key that only one side's build writes (a record
added since: the model's tokenizer) is compared only where both have it;
metrics records equal except their timing fields.
Prints each difference and exits 1 when there is one. Standard library only.
"""
import json
import os
import struct
import sys

# Fields of a metrics record that are measurements of time, not results.
TIMING_FIELDS = {"samples_per_s", "tokens_per_s", "allreduce_ms_per_step", "allreduce_hidden_fraction", "wall_s",
                 "step_ms", "ms_per_step", "mfu", "checkpoint_blocked_s", "checkpoint_wait_s", "checkpoint_write_s"}
# Checkpoint metadata that differs between any two runs by design.
LINEAGE_FIELDS = {"run_id", "crc32"}
# Checkpoint metadata a later build added (an older one's checkpoints lack it).
ADDED_FIELDS = {"tokenizer"}


def files_under(root):
    found = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            found.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(found)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    metadata = {k: v for k, v in header.pop("__metadata__", {}).items() if k not in LINEAGE_FIELDS}
    return header, metadata, data[8 + header_len:]


def metrics_records(path):
    records = []
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            records.append({k: v for k, v in record.items() if k not in TIMING_FIELDS})
    return records


def differences(old, new):
    problems = []
    old_files, new_files = files_under(old), files_under(new)
    if old_files != new_files:
        problems.append("different files: %s vs %s" % (sorted(set(old_files) - set(new_files)),
                                                        sorted(set(new_files) - set(old_files))))
    if not any(f.startswith("w" + os.sep) for f in old_files):
        problems.append("no weight files written")
    for rel in sorted(set(old_files) & set(new_files)):
        a, b = os.path.join(old, rel), os.path.join(new, rel)
        if rel.endswith(".safetensors") and rel.startswith("ck" + os.sep):
            (header_a, meta_a, data_a), (header_b, meta_b, data_b) = read_safetensors(a), read_safetensors(b)
            for key in ADDED_FIELDS:
                if (key in meta_a) != (key in meta_b):
                    meta_a.pop(key, None)
                    meta_b.pop(key, None)
            if (header_a, meta_a, data_a) != (header_b, meta_b, data_b):
                problems.append(rel + ": checkpoint differs")
        elif rel.endswith(".jsonl"):
            ra, rb = metrics_records(a), metrics_records(b)
            if len(ra) != len(rb):
                problems.append("%s: %d records vs %d" % (rel, len(ra), len(rb)))
            for i, (x, y) in enumerate(zip(ra, rb)):
                if x != y:
                    problems.append("%s: record %d differs: %s vs %s" % (rel, i + 1, x, y))
                    break
        else:
            with open(a, "rb") as fa, open(b, "rb") as fb:
                if fa.read() != fb.read():
                    problems.append(rel + ": bytes differ")
    return problems


def cli():
    if len(sys.argv) != 3:
        print("usage: python3 -m ddp_tools.checks.bitwise_outputs OLD_DIR NEW_DIR", file=sys.stderr)
        return 2
    problems = differences(sys.argv[1], sys.argv[2])
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(cli())
