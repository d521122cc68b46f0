#!/usr/bin/env python3
"""torch_bfloat16_bits.py IN OUT: PyTorch's float32 -> bfloat16 conversion of IN's values
(raw little-endian float32) into OUT (raw little-endian uint16 bits), as
`torch.tensor(x).to(torch.bfloat16)` gives them: each value converted alone (the scalar
c10::BFloat16 path) and the whole array at once (the vectorised path); exits 1 if the two
disagree on any value that is not a NaN, 77 when torch is missing (a skip)."""
import sys

try:
    import torch
except ImportError:
    print("torch is not installed for " + sys.executable)
    sys.exit(77)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, "rb") as f:
        data = bytearray(f.read())
    values = torch.frombuffer(data, dtype=torch.float32)
    whole = values.to(torch.bfloat16).view(torch.int16)
    alone = torch.stack([torch.tensor(float(x), dtype=torch.float32).to(torch.bfloat16) for x in values.tolist()])
    alone = alone.view(torch.int16)
    nan = torch.isnan(values)
    if not torch.equal(whole[~nan], alone[~nan]):
        print("torch's scalar and vectorised bfloat16 conversions differ")
        return 1
    with open(dst, "wb") as f:
        f.write(whole.numpy().tobytes())
    print(f"torch {torch.__version__}: {values.numel()} values")
    return 0


if __name__ == "__main__":
    sys.exit(main())
