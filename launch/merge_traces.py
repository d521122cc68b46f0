#!/usr/bin/env python3
"""launch/merge_traces.py: runs ddp_tools.traces.merge_traces
(launch/ddp_tools/traces/merge_traces.py), as `python3 -m ddp_tools.traces.merge_traces`
does with launch/ on the path. Python puts this script's directory, launch/, first on
the path itself."""
import sys

from ddp_tools.traces.merge_traces import cli

if __name__ == "__main__":
    sys.exit(cli())
