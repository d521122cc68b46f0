#!/usr/bin/env python3
"""launch/metrics_to_tensorboard.py: runs ddp_tools.plots.metrics_to_tensorboard
(launch/ddp_tools/plots/metrics_to_tensorboard.py), as `python3 -m
ddp_tools.plots.metrics_to_tensorboard` does with launch/ on the path. Python puts this
script's directory, launch/, first on the path itself."""
import sys

from ddp_tools.plots.metrics_to_tensorboard import cli

if __name__ == "__main__":
    sys.exit(cli())
