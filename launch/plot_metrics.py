#!/usr/bin/env python3
"""launch/plot_metrics.py: runs ddp_tools.plots.plot_metrics
(launch/ddp_tools/plots/plot_metrics.py), as `python3 -m ddp_tools.plots.plot_metrics`
does with launch/ on the path. Python puts this script's directory, launch/, first on
the path itself."""
import sys

from ddp_tools.plots.plot_metrics import cli

if __name__ == "__main__":
    sys.exit(cli())
