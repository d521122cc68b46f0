#!/usr/bin/env python3
"""launch/bench_tokenizer.py: runs ddp_tools.tokenizer.bench_tokenizer
(launch/ddp_tools/tokenizer/bench_tokenizer.py): ddp_tokenize against tiktoken, MB/s at the
same thread counts. Python puts this script's directory, launch/, first on the path itself."""
import sys

from ddp_tools.tokenizer.bench_tokenizer import cli

if __name__ == "__main__":
    sys.exit(cli())
