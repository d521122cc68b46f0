#!/usr/bin/env python3
"""launch/plot_sweep.py: runs ddp_tools.plots.plot_sweep
(launch/ddp_tools/plots/plot_sweep.py), as `python3 -m ddp_tools.plots.plot_sweep` does
with launch/ on the path. Python puts this script's directory, launch/, first on the
path itself."""
import sys

from ddp_tools.plots.plot_sweep import cli

if __name__ == "__main__":
    sys.exit(cli())
