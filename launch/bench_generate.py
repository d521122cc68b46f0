#!/usr/bin/env python3
"""launch/bench_generate.py: runs ddp_tools.torch_ref.bench_generate
(launch/ddp_tools/torch_ref/bench_generate.py): tokens/s of ddp_train --generate with and without
its KV cache beside transformers' generate, same model, prompt and threads. Python puts this
script's directory, launch/, first on the path itself."""
import sys

from ddp_tools.torch_ref.bench_generate import main

if __name__ == "__main__":
    sys.exit(main())
