"""tiktoken_gpt2.py: tiktoken's GPT-2 (r50k_base) Encoding, built from a local ranks file
(launch/fetch_gpt2_ranks.sh) with tiktoken's own r50k_base pattern and special token, so
tiktoken downloads nothing. Needs PyPI's tiktoken (launch/install_deps.sh installs it for
Debian's /usr/bin/python3)."""
import hashlib

R50K_BASE_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
END_OF_TEXT = 50256


def load_encoding(ranks_path):
    """tiktoken.Encoding of r50k_base from `ranks_path`; ValueError if its sha256 is not r50k_base's."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from tiktoken_ext.openai_public import r50k_pat_str

    with open(ranks_path, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    if got != R50K_BASE_SHA256:
        raise ValueError(f"{ranks_path}: sha256 {got}, not r50k_base's {R50K_BASE_SHA256}")
    # expected_hash: tiktoken checks it again itself.
    ranks = load_tiktoken_bpe(ranks_path, expected_hash=R50K_BASE_SHA256)
    return tiktoken.Encoding("r50k_base_local", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": END_OF_TEXT}, explicit_n_vocab=50257)
