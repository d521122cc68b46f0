// flags_output.cpp: the flags of what a run writes and reads back:
// metrics, traces, checkpoints, weights, --predict, --generate and
// sampling, --eval-only.
#include "launch/cli/flag_groups.h"

#include "kernels/error.h"
#include "trainer/report/trace_window.h"

namespace po = boost::program_options;

namespace ddp {

po::options_description output_flags(TrainConfig& c, FlagText& t) {
  po::options_description output("Output and checkpoints");
  // One flag per row, as --help lists them.
  // clang-format off
  output.add_options()
      ("metrics", po::value(&c.metrics_path), "JSON Lines metrics file")
      ("overwrite", po::bool_switch(&c.overwrite),
       "replace an existing output file (--metrics, --trace, --save-weights, --predictions, --generate-logits) "
       "that ddp_train did not write, or with --resume append to such a --metrics file; without it such a file "
       "is refused, and one ddp_train wrote (as recorded in $XDG_STATE_HOME/ddp_train/outputs.jsonl) is replaced, "
       "saying so")
      ("trace", po::value(&c.trace_path),
       "each rank's timeline (layers' forward/backward, each bucket's collective, optimizer) as Chrome trace JSON "
       "(Perfetto, chrome://tracing) in FILE with the rank inserted: run.json -> run.rank0.json; merge the ranks' "
       "files with launch/merge_traces.py")
      ("trace-steps", po::value(&t.trace_steps)->default_value("1:20"), "--trace: the global steps A:B to trace")
      ("log-every", po::value(&c.log_every)->default_value(c.log_every), "steps per log line / step record")
      ("eval-every", po::value(&c.eval_every)->default_value(0),
       "also evaluate the test (validation) split every N optimizer steps (0: at epoch ends and at the end only)")
      ("sample-every", po::value(&c.sample_every)->default_value(0),
       "--model gpt: every N optimizer steps rank 0 prints a sample from the current weights, after --prompt "
       "(default a newline for bytes, <|endoftext|> for gpt2), temperature 0.8 and top-k 40 unless given, seed "
       "--seed + step (0: off)")
      ("sample-length", po::value(&c.sample_length)->default_value(c.sample_length),
       "--sample-every: tokens per sample (bytes for a byte model)")
      ("checkpoint-dir", po::value(&c.checkpoint_dir), "directory for checkpoints")
      ("checkpoint-every", po::value(&c.checkpoint_every)->default_value(0), "steps between checkpoints (0: at the end only)")
      ("keep-checkpoints", po::value(&c.keep_checkpoints)->default_value(0), "keep the K newest (0: all)")
      ("async-checkpoint", po::bool_switch(&c.async_checkpoint),
       "copy the state to host memory at the step boundary and write the checkpoint on a background thread while "
       "training goes on (one write in flight: the next checkpoint, the end and a stop wait for it; same files, "
       "same atomic write and pruning)")
      ("resume", po::value(&c.resume_path)->implicit_value(""), "resume from PATH, or bare: the newest valid in --checkpoint-dir")
      ("save-weights", po::value(&c.save_weights_dir),
       "at the end, write the FP32 weights: PATH.safetensors one file under PyTorch state_dict names, else a "
       "directory of layer<i>.{weight,bias}.npy, or with --weights-format hf a Hugging Face GPT-2 directory")
      ("save-weights-dtype", po::value(&c.save_weights_dtype)->default_value(c.save_weights_dtype),
       "fp32 | fp16 | bf16: --save-weights' tensors in FP32, or rounded once (to nearest even) from the FP32 "
       "masters, as .half() / .to(torch.bfloat16) do (a .safetensors file or --weights-format hf; half the bytes); "
       "fp16 falls back to fp32, saying so, when a weight is beyond FP16's 65504")
      ("weights-format", po::value(&c.weights_format)->default_value(c.weights_format),
       "auto | hf: --save-weights by its path, or (--model gpt) a directory of config.json and model.safetensors "
       "that transformers' GPT2LMHeadModel.from_pretrained loads (the vocabulary cut to the real one)")
      ("init-weights", po::value(&c.init_weights_dir),
       "start from PATH.safetensors (F32, F16 or BF16 tensors under the state_dict names), a directory of "
       "layer<i>.{weight,bias}.npy, or Hugging Face GPT-2 weights: a save_pretrained directory (config.json + "
       "model.safetensors; the shape is its config's) or its model.safetensors (give --n-head); its dropout "
       "is not applied")
      ("predict", po::value(&c.predict_path), "run inference of the starting weights on every row of this [N, D] .npy")
      ("predictions", po::value(&c.predictions_path), "where --predict writes its outputs (.npy, gathered on rank 0)")
      ("predict-output", po::value(&c.predict_output),
       "logits | probs | class (default: class for --loss xent, logits for mse)")
      ("generate", po::value(&c.generate_tokens),
       "--model gpt: print N tokens sampled after --prompt from the --resume checkpoint (its shape and tokenizer) "
       "or the --init-weights (the shape flags'), decoded to stdout alone; trains nothing")
      ("kv-cache", po::value(&t.kv_cache)->default_value("on"),
       "--generate, --sample-every: on keeps each layer's keys and values, one position's forward per token; off "
       "runs the last --block-size tokens for every token. Past the context both crop to the last --block-size "
       "tokens (nanoGPT's generate), where the cache is refilled")
      ("generate-logits", po::value(&c.generate_logits_path),
       "--generate: also write each drawn token's FP32 logits (real classes) to this [N, vocab] .npy")
      ("prompt", po::value(&c.prompt),
       "--generate, --sample-every: the text to continue (1 to --block-size tokens of the model's tokenizer)")
      ("tokenizer", po::value(&c.tokenizer),
       "bytes | gpt2: the model's tokenizer where its data or weights do not say (a raw-u16 file with "
       "--vocab-size, weights that record none); must agree where they do")
      ("gpt2-ranks", po::value(&c.gpt2_ranks_path)->default_value(c.gpt2_ranks_path),
       "GPT-2's r50k_base ranks file, to encode and decode a gpt2 model's tokens (launch/fetch_gpt2_ranks.sh DIR)")
      ("temperature", po::value(&c.temperature)->default_value(c.temperature),
       "--generate, --sample-every: divide the logits by T before the softmax (0: greedy argmax; "
       "--sample-every's default is 0.8)")
      ("top-k", po::value(&c.top_k)->default_value(c.top_k),
       "--generate, --sample-every: sample among the K likeliest tokens (0: all; --sample-every's default is 40)")
      ("eval-only", po::bool_switch(&c.eval_only),
       "evaluate the --resume checkpoint or the --init-weights on the test set (sharded over the ranks), train nothing");
  // clang-format on
  return output;
}

void apply_output_flags(const FlagText& t, TrainConfig& c) {
  const TraceWindow w = parse_trace_window(t.trace_steps);
  c.trace_first = w.first;
  c.trace_last = w.last;
  if (!c.resume_path.empty() && !c.resume) c.resume = true;
  if (t.kv_cache != "on" && t.kv_cache != "off") throw Error("--kv-cache: '" + t.kv_cache + "' is not one of on, off");
  c.kv_cache = t.kv_cache == "on";
}

}  // namespace ddp
