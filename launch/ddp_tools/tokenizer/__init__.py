"""ddp_tools.tokenizer: ddp_tokenize (GPT-2's BPE) beside tiktoken: tiktoken_gpt2 (tiktoken's
Encoding on the local ranks file), tokenizer_texts (generated test and benchmark texts),
bench_tokenizer (MB/s of both at the same thread counts)."""
