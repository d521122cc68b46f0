#!/usr/bin/env python3
"""careless_ckpt.py IN OUT FIELD=VALUE...: rewrites a ddp_train checkpoint
(layout in trainer/checkpoint/checkpoint.h) with fields changed and the CRC-32 fixed, for
launch/careless_user.sh. Fields: widths (4,8,3), activation, loss, mom_init,
scale, growth, hyst, step, epoch, offset, skipped, seed, run_id,
train_samples, global_batch, w0 / m0 (first weight / momentum value).
Raw overrides applied after serialising: H (header length field), wcount
(declared weight count), T (total length field); nocrc=1 keeps the old CRC."""
import struct
import sys
import zlib

INTS = ["growth", "hyst", "step", "epoch", "offset", "skipped"]


def parse(b):
    h_len = struct.unpack_from("<I", b, 12)[0]
    h, p, f = b[16:16 + h_len], 0, {}
    n = struct.unpack_from("<Q", h, p)[0]; p += 8
    f["widths"] = list(struct.unpack_from("<%dq" % n, h, p)); p += 8 * n
    for key in ("activation", "loss"):
        n = struct.unpack_from("<I", h, p)[0]; p += 4
        f[key] = h[p:p + n].decode(); p += n
    f["mom_init"] = h[p]; p += 1
    f["scale"] = struct.unpack_from("<d", h, p)[0]; p += 8
    for key in INTS:
        f[key] = struct.unpack_from("<q", h, p)[0]; p += 8
    f["seed"] = struct.unpack_from("<Q", h, p)[0]; p += 8
    f["run_id"], f["train_samples"], f["global_batch"] = struct.unpack_from("<QQq", h, p)
    q = 16 + h_len
    for key in ("w", "m"):
        n = struct.unpack_from("<Q", b, q)[0]; q += 8
        f[key] = list(struct.unpack_from("<%df" % n, b, q)); q += 4 * n
    return f


def serialise(f):
    h = struct.pack("<Q", len(f["widths"])) + struct.pack("<%dq" % len(f["widths"]), *f["widths"])
    for key in ("activation", "loss"):
        h += struct.pack("<I", len(f[key])) + f[key].encode()
    h += bytes([f["mom_init"] & 0xFF]) + struct.pack("<d", f["scale"])
    h += struct.pack("<6q", *[f[k] for k in INTS]) + struct.pack("<Q", f["seed"])
    h += struct.pack("<QQq", f["run_id"], f["train_samples"], f["global_batch"])
    body = b"DDPCKPT1" + struct.pack("<II", 1, len(h)) + h
    for key in ("w", "m"):
        body += struct.pack("<Q", len(f[key])) + struct.pack("<%df" % len(f[key]), *f[key])
    return bytearray(body + struct.pack("<Q", len(body) + 12) + b"\0\0\0\0")


def main():
    src, dst, edits = sys.argv[1], sys.argv[2], dict(a.split("=", 1) for a in sys.argv[3:])
    old = open(src, "rb").read()
    f = parse(old)
    for key, value in edits.items():
        if key == "widths":
            f[key] = [int(x) for x in value.split(",")]
        elif key in ("activation", "loss"):
            f[key] = value
        elif key == "scale":
            f[key] = float(value)
        elif key in ("w0", "m0"):
            f[key[0]][0] = float(value)
        elif key in f:
            f[key] = int(value)
    b = serialise(f)
    if "H" in edits: struct.pack_into("<I", b, 12, int(edits["H"]))
    if "wcount" in edits: struct.pack_into("<Q", b, 16 + struct.unpack_from("<I", old, 12)[0], int(edits["wcount"]))
    if "T" in edits: struct.pack_into("<Q", b, len(b) - 12, int(edits["T"]))
    crc = old[-4:] if edits.get("nocrc") else struct.pack("<I", zlib.crc32(bytes(b[:-4])) & 0xFFFFFFFF)
    b[-4:] = crc
    open(dst, "wb").write(bytes(b))


if __name__ == "__main__":
    main()
