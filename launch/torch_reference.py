#!/usr/bin/env python3
"""launch/torch_reference.py: runs ddp_tools.torch_ref.torch_reference
(launch/ddp_tools/torch_ref/torch_reference.py), as `python3 -m
ddp_tools.torch_ref.torch_reference` does with launch/ on the path. Python puts this
script's directory, launch/, first on the path itself."""
import sys

from ddp_tools.torch_ref.torch_reference import cli

if __name__ == "__main__":
    sys.exit(cli())
