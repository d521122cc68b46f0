#!/usr/bin/env python3
"""launch/torch_gpt.py: runs ddp_tools.torch_ref.torch_gpt
(launch/ddp_tools/torch_ref/torch_gpt.py) as `python3 -m ddp_tools.torch_ref.torch_gpt`
does with launch/ on the path: as __main__, since the module itself decides at import
that a missing torch is a skip (exit 77) when it runs as a script. Python puts this
script's directory, launch/, first on the path itself."""
import runpy

runpy.run_module("ddp_tools.torch_ref.torch_gpt", run_name="__main__", alter_sys=True)
