#!/usr/bin/env python3
"""launch/zero_table.py: runs ddp_tools.sweeps.zero_table
(launch/ddp_tools/sweeps/zero_table.py), as `python3 -m ddp_tools.sweeps.zero_table`
does with launch/ on the path. Python puts this script's directory, launch/, first on
the path itself."""
import sys

from ddp_tools.sweeps.zero_table import cli

if __name__ == "__main__":
    sys.exit(cli())
