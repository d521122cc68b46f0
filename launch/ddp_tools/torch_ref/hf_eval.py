"""hf_eval.py DIR TOKENS.bin BLOCK_SIZE: transformers' GPT2LMHeadModel (from_pretrained DIR)
evaluated on the windows ddp_train's --data text cuts from an llm.c shard (window i = tokens
[i*T, i*T + T], the inputs then the next tokens): prints the mean cross-entropy in nats, as
ddp_train's test_loss, on one line ("hf_eval: loss L over N windows"). Exit 77 without torch
or transformers. Used by launch/finetune_lm.sh to check an export."""
import sys


def load_llmc(path):
    import numpy as np
    data = open(path, "rb").read()
    header = np.frombuffer(data[:1024], dtype="<i4")
    if header[0] != 20240520 or header[1] != 1:
        raise SystemExit(f"hf_eval: {path}: not an llm.c shard")
    return np.frombuffer(data[1024:], dtype="<u2").astype("int64")


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    try:
        import torch
        from transformers import GPT2LMHeadModel
    except ImportError as e:
        print(f"hf_eval: skipped: {e} (launch/install_test_deps.sh installs torch and transformers)")
        return 77
    directory, tokens_path, t = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(2)
    model = GPT2LMHeadModel.from_pretrained(directory).eval()
    ids = torch.from_numpy(load_llmc(tokens_path))
    n = (len(ids) - 1) // t
    x, y = ids[:n * t].view(n, t), ids[1:n * t + 1].view(n, t)
    total = 0.0
    with torch.no_grad():
        for i in range(0, n, 16):
            logits = model(x[i:i + 16]).logits
            total += torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[i:i + 16].reshape(-1),
                                                       reduction="sum").item()
    print(f"hf_eval: loss {total / (n * t):.6f} over {n} windows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
