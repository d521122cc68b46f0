#!/usr/bin/env python3
"""launch/tune.py: runs ddp_tools.tune.tune (launch/ddp_tools/tune/tune.py), as `python3 -m
ddp_tools.tune.tune` does with launch/ on the path. Python puts this script's directory,
launch/, first on the path itself."""
import sys

from ddp_tools.tune.tune import cli

if __name__ == "__main__":
    sys.exit(cli())
