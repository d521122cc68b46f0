#!/usr/bin/env python3
"""careless_ckpt.py IN OUT FIELD=VALUE...: rewrites a ddp_train checkpoint
(format 2, a safetensors file: trainer/checkpoint/checkpoint_v2.h) with
fields changed and its CRC-32 fixed, for launch/careless_user.sh.

Fields (the training state in __metadata__): widths (4,8,3), activation,
loss, mom_init, scale, growth, hyst, step, epoch, offset, skipped, seed,
run_id, train_samples, global_batch, optimizer; w0 / m0 (the first value of
the first weight tensor / of its optimizer state); dtype=F16 stores the
first weight tensor in FP16. Raw overrides applied after encoding: H (the
8-byte header size), wcount (tensor_bytes, the buffer length the metadata
claims), T (the header size set short, cutting the JSON); nocrc=1 keeps
the old CRC. Only the standard library: runs under any python3.
"""
import json
import struct
import sys
import zlib

KEYS = {"widths": "model_dims", "activation": "activation", "loss": "loss", "mom_init": "momentum_initialized",
        "scale": "loss_scale", "growth": "growth_tracker", "hyst": "hysteresis_left", "step": "step", "epoch": "epoch",
        "offset": "epoch_sample_offset", "skipped": "skipped_steps", "seed": "seed", "run_id": "run_id",
        "train_samples": "train_samples", "global_batch": "global_batch", "optimizer": "optimizer"}


def parse(b):
    n = struct.unpack_from("<Q", b, 0)[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__")
    tensors = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    buf = b[8 + n:]
    return [(name, e["dtype"], e["shape"], bytearray(buf[e["data_offsets"][0]:e["data_offsets"][1]]))
            for name, e in tensors], meta


def crc_of(tensors, meta):
    """checkpoint_v2.cpp's checksum_of, transcribed."""
    text, offset, buf = b"", 0, b""
    for name, dtype, shape, data in tensors:
        dims = ",".join(str(d) for d in shape)
        text += f"{name}\0{dtype}\0{dims}\0{offset},{offset + len(data)}\n".encode()
        offset += len(data)
        buf += bytes(data)
    for key in sorted(meta):
        if key != "crc32":
            text += key.encode() + b"\0" + meta[key].encode() + b"\n"
    return "%08x" % (zlib.crc32(buf, zlib.crc32(text)) & 0xFFFFFFFF)


def encode(tensors, meta):
    header, offset = {"__metadata__": meta}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return bytearray(struct.pack("<Q", len(text)) + text + b"".join(bytes(t[3]) for t in tensors))


def main():
    src, dst, edits = sys.argv[1], sys.argv[2], dict(a.split("=", 1) for a in sys.argv[3:])
    tensors, meta = parse(open(src, "rb").read())
    old_crc = meta["crc32"]
    first = tensors[0][0]
    for key, value in edits.items():
        if key in KEYS:
            meta[KEYS[key]] = value
        elif key in ("w0", "m0"):
            target = first if key == "w0" else next(t[0] for t in tensors if t[0].startswith("optim.") and
                                                    t[0].endswith("." + first))
            data = next(t[3] for t in tensors if t[0] == target)
            struct.pack_into("<f", data, 0, float(value))
        elif key == "dtype" and value == "F16":
            name, _, shape, data = tensors[0]
            count = len(data) // 4
            halves = struct.pack("<%de" % count, *struct.unpack("<%df" % count, data))
            tensors[0] = (name, "F16", shape, bytearray(halves))
    meta["tensor_bytes"] = str(sum(len(t[3]) for t in tensors))
    if "wcount" in edits:
        meta["tensor_bytes"] = edits["wcount"]
    meta["crc32"] = old_crc if edits.get("nocrc") else crc_of(tensors, meta)
    b = encode(tensors, meta)
    if "H" in edits:
        struct.pack_into("<Q", b, 0, int(edits["H"]))
    if "T" in edits:
        struct.pack_into("<Q", b, 0, int(edits["T"]))
    open(dst, "wb").write(bytes(b))


if __name__ == "__main__":
    main()
