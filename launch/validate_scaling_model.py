#!/usr/bin/env python3
"""launch/validate_scaling_model.py: runs ddp_tools.scaling.validate_scaling_model
(launch/ddp_tools/scaling/validate_scaling_model.py), as `python3 -m
ddp_tools.scaling.validate_scaling_model` does with launch/ on the path. Python puts
this script's directory, launch/, first on the path itself."""
import sys

from ddp_tools.scaling.validate_scaling_model import cli

if __name__ == "__main__":
    sys.exit(cli())
