#!/usr/bin/env python3
"""launch/compare_torch.py: runs ddp_tools.torch_ref.compare_torch
(launch/ddp_tools/torch_ref/compare_torch.py), as `python3 -m
ddp_tools.torch_ref.compare_torch` does with launch/ on the path. Python puts this
script's directory, launch/, first on the path itself."""
import sys

from ddp_tools.torch_ref.compare_torch import cli

if __name__ == "__main__":
    sys.exit(cli())
