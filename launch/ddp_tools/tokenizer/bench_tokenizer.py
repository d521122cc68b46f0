"""bench_tokenizer.py: ddp_tokenize and tiktoken tokenizing the same file at the same thread
counts, side by side: MB/s of each and their ratio, and whether the ids agree.

  launch/bench_tokenizer.py --ranks data/gpt2.tiktoken [--input FILE | --generate-mb 20] [--threads 1,2]

ddp_tokenize is timed as a process, wall clock (start-up, reading, UTF-8 check, encoding and
writing the .bin included); tiktoken in this process from the file's bytes (decode to str,
encode_ordinary_batch over 1 MB chunks cut where ddp_tokenize may cut, num_threads=N), the
best of --repeat runs for both. Without --input, a text is generated (ddp_tools.tokenizer.
tokenizer_texts: ASCII prose) from --seed."""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from ddp_tools.common import repo_paths
from ddp_tools.tokenizer import tiktoken_gpt2, tokenizer_texts

CHUNK_BYTES = 1 << 20


def safe_chunks(text):
    """The text cut as ddp_tokenize cuts it (trainer/tokenizer/text_chunks.h), on str indices:
    before an ASCII whitespace character that follows a non-whitespace ASCII one."""
    ws = " \t\n\x0b\x0c\r"
    out, start, p = [], 0, CHUNK_BYTES
    while p < len(text):
        while p < len(text) and not (text[p] in ws and ord(text[p - 1]) < 128 and text[p - 1] not in ws):
            p += 1
        if p >= len(text):
            break
        out.append(text[start:p])
        start = p
        p += CHUNK_BYTES
    out.append(text[start:])
    return out


def time_ours(tool, ranks, path, out, threads, repeat):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([tool, "--tokenizer", "gpt2", "--ranks", ranks, path, "-o", out, "--threads", str(threads),
                        "--overwrite"], check=True, capture_output=True)
        t = time.perf_counter() - t0
        best = t if best is None else min(best, t)
    with open(out, "rb") as f:
        ids = np.frombuffer(f.read()[1024:], dtype="<u2")[1:].tolist()
    return best, ids


def time_tiktoken(enc, path, threads, repeat):
    best, ids = None, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        batches = enc.encode_ordinary_batch(safe_chunks(text), num_threads=threads)
        t = time.perf_counter() - t0
        best = t if best is None else min(best, t)
        ids = [i for b in batches for i in b]
    return best, ids


def cli(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", required=True)
    ap.add_argument("--input", help="the text to tokenize (default: one generated from --seed)")
    ap.add_argument("--generate-mb", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ddp-tokenize", default=os.path.join(repo_paths.REPO, "build", "ddp_tokenize"))
    a = ap.parse_args(argv)
    enc = tiktoken_gpt2.load_encoding(a.ranks)
    with tempfile.TemporaryDirectory() as tmp:
        path = a.input
        if path is None:
            path = os.path.join(tmp, "generated.txt")
            with open(path, "w", encoding="utf-8") as f:
                f.write(tokenizer_texts.ascii_text(tokenizer_texts.new_rng(a.seed), int(a.generate_mb * 1e6)))
        mb = os.path.getsize(path) / 1e6
        name = a.input or f"generated ASCII prose (seed {a.seed})"
        print(f"input: {name}, {mb:.2f} MB; best of {a.repeat}")
        print("| threads | ddp_tokenize s | ddp_tokenize MB/s | tiktoken s | tiktoken MB/s | ours / tiktoken | ids equal |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for threads in [int(t) for t in a.threads.split(",")]:
            ours_s, ours_ids = time_ours(a.ddp_tokenize, a.ranks, path, os.path.join(tmp, "o.bin"), threads, a.repeat)
            tik_s, tik_ids = time_tiktoken(enc, path, threads, a.repeat)
            print(f"| {threads} | {ours_s:.3f} | {mb / ours_s:.1f} | {tik_s:.3f} | {mb / tik_s:.1f} | "
                  f"{tik_s / ours_s:.2f} | {'yes' if ours_ids == tik_ids else 'NO'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
