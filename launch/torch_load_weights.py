#!/usr/bin/env python3
"""launch/torch_load_weights.py: runs ddp_tools.torch_ref.torch_load_weights
(launch/ddp_tools/torch_ref/torch_load_weights.py), as `python3 -m
ddp_tools.torch_ref.torch_load_weights` does with launch/ on the path. Python puts this
script's directory, launch/, first on the path itself."""
import sys

from ddp_tools.torch_ref.torch_load_weights import cli

if __name__ == "__main__":
    sys.exit(cli())
