#!/usr/bin/env python3
"""st_fixture.py IN OUT MUTATION [ARG]: writes OUT, a safetensors file made
from IN (a --save-weights file) with one thing wrong or unusual, for the
careless-user cases in launch/careless/safetensors_inputs.sh.

Mutations: dtype=CODE (the first tensor's dtype label, bytes unchanged),
f64 (the first tensor widened to F64), f16 / bf16 (every tensor narrowed,
round to nearest even), drop (the first tensor left out), extra (a tensor the
model lacks), shape (the first tensor's shape transposed or cut), overlap
(the second tensor's offsets start inside the first's), reorder (header keys
in reverse byte order: valid), gap (8 unused bytes between two tensors),
beyond (the last tensor's end past the file), nonjson, dupkey (the first
tensor named twice), nan / inf (the first weight element), neg (a negative
dimension), huge (a shape whose element count overflows 64 bits), meta
(a __metadata__ value that is not a string), zerolen (header length 0),
longlen (header length past the file), reference (rewritten by PyPI's
safetensors library: torch when importable, else numpy, F32).
Standard library only, except `reference`.
"""
import json
import math
import struct
import sys

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I32": 4, "I64": 8, "U8": 1}


def read(path):
    b = open(path, "rb").read()
    n = struct.unpack_from("<Q", b, 0)[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", None)
    data = b[8 + n:]
    items = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    tensors = [[k, v["dtype"], list(v["shape"]), data[v["data_offsets"][0]:v["data_offsets"][1]]] for k, v in items]
    return tensors, meta


def f32_values(raw):
    return struct.unpack("<%df" % (len(raw) // 4), raw)


def to_f16(raw):
    return b"".join(struct.pack("<e", v) for v in f32_values(raw))


def to_bf16(raw):
    out = bytearray()
    for (u,) in struct.iter_unpack("<I", raw):
        u += 0x7FFF + ((u >> 16) & 1)  # round to nearest even
        out += struct.pack("<H", (u >> 16) & 0xFFFF)
    return bytes(out)


def layout(tensors, gap_after=None):
    """Header entries with contiguous offsets (a gap after one tensor if asked)."""
    header, pos, blob = {}, 0, b""
    for i, (name, dtype, shape, raw) in enumerate(tensors):
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + len(raw)]}
        pos += len(raw)
        blob += raw
        if i == gap_after:
            pos += 8
            blob += b"\0" * 8
    return header, blob


def encode(header_text, blob, length=None):
    h = header_text.encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h) if length is None else length) + h + blob


def main():
    src, out, mutation = sys.argv[1], sys.argv[2], sys.argv[3]
    arg = sys.argv[4] if len(sys.argv) > 4 else None
    tensors, meta = read(src)
    meta = meta or {"format": "pt"}
    first = tensors[0]
    gap_after, length, text = None, None, None
    if mutation == "reference":
        return reference(tensors, out)
    if mutation == "dtype":
        first[1] = arg
    elif mutation == "f64":
        first[1], first[3] = "F64", b"".join(struct.pack("<d", v) for v in f32_values(first[3]))
    elif mutation in ("f16", "bf16"):
        for t in tensors:
            t[1], t[3] = mutation.upper(), (to_f16 if mutation == "f16" else to_bf16)(t[3])
    elif mutation == "drop":
        tensors = tensors[1:]
    elif mutation == "extra":
        tensors.append(["extra.weight", "F32", [2], struct.pack("<2f", 1.0, 2.0)])
    elif mutation == "shape":
        first[2] = first[2][::-1] if len(first[2]) == 2 and first[2][0] != first[2][1] else [1, len(first[3]) // 4]
    elif mutation == "nan" or mutation == "inf":
        first[3] = struct.pack("<f", math.nan if mutation == "nan" else math.inf) + first[3][4:]
    elif mutation == "neg":
        first[2] = [-first[2][0]] + first[2][1:]
    elif mutation == "huge":
        first[2] = [2 ** 62, 2 ** 62]
    elif mutation == "gap":
        gap_after = 0
    elif mutation == "meta":
        meta = {"format": "pt", "epoch": 3}
    elif mutation == "zerolen":
        length = 0
    elif mutation == "longlen":
        length = 1 << 40
    header, blob = layout(tensors, gap_after)
    if mutation == "overlap":
        a, b = header[tensors[0][0]], header[tensors[1][0]]
        shift = min(4, a["data_offsets"][1])
        b["data_offsets"] = [b["data_offsets"][0] - shift, b["data_offsets"][1] - shift]
    if mutation == "beyond":
        last = header[tensors[-1][0]]
        last["data_offsets"][1] += 64
    entries = [("__metadata__", meta)] + list(header.items())
    if mutation == "reorder":
        entries = [entries[0]] + entries[1:][::-1]
    text = "{" + ",".join(json.dumps(k) + ":" + json.dumps(v) for k, v in entries) + "}"
    if mutation == "dupkey":
        k, v = entries[1]
        text = text[:-1] + "," + json.dumps(k) + ":" + json.dumps(v) + "}"
    if mutation == "nonjson":
        text = "{'format': pt, " + text[1:]
    open(out, "wb").write(encode(text, blob, length))


def reference(tensors, out):
    """The same tensors written by the reference implementation (F32)."""
    try:
        import torch
        from safetensors.torch import save_file
        save_file({n: torch.tensor(f32_values(r), dtype=torch.float32).reshape(s) for n, _, s, r in tensors}, out)
        print("torch")
    except ImportError:
        import numpy as np
        from safetensors.numpy import save_file
        save_file({n: np.frombuffer(r, dtype="<f4").reshape(s) for n, _, s, r in tensors}, out)
        print("numpy")


if __name__ == "__main__":
    main()
