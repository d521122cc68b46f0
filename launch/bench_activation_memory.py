#!/usr/bin/env python3
"""launch/bench_activation_memory.py: runs ddp_tools.torch_ref.bench_activation_memory
(launch/ddp_tools/torch_ref/bench_activation_memory.py): the GPT's peak activation memory and
tokens/s at each --recompute x --attention x --classifier-chunk setting the binary has, the largest
batch in a memory budget, and tokens/s against PyTorch fp32 eager. Python puts this script's
directory, launch/, first on the path itself."""
import sys

from ddp_tools.torch_ref.bench_activation_memory import cli

if __name__ == "__main__":
    sys.exit(cli())
