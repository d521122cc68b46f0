#!/usr/bin/env python3
"""launch/gpt_equivalence.py: runs ddp_tools.torch_ref.gpt_equivalence
(launch/ddp_tools/torch_ref/gpt_equivalence.py), as `python3 -m
ddp_tools.torch_ref.gpt_equivalence` does with launch/ on the path. Python puts this
script's directory, launch/, first on the path itself."""
import sys

from ddp_tools.torch_ref.gpt_equivalence import cli

if __name__ == "__main__":
    sys.exit(cli())
