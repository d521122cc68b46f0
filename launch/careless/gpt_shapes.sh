# gpt_shapes.sh: careless-user cases of GPT shapes that cannot work (heads
# that do not divide the width, zero or negative sizes, models that cannot
# fit memory) and of flags that mean nothing for the GPT.

gpt_shapes() {
  gpt_fixtures
  local LM="--device cpu --threads 1 --data text --train-text $T/lm.txt --model gpt --batch-size 4 --steps 2"
  case_refused "--n-embd 30 --n-head 4 (not divisible)" "--n-head|--n-embd" -- "$BIN" $LM --n-embd 30 --n-head 4 --block-size 8
  case_refused "--n-layer 0" "--n-layer" -- "$BIN" $LM --n-layer 0 --block-size 8
  case_refused "--n-head 0" "--n-head" -- "$BIN" $LM --n-head 0 --block-size 8
  case_refused "--n-embd 0" "--n-embd" -- "$BIN" $LM --n-embd 0 --block-size 8
  case_refused "--n-layer -2" "--n-layer" -- "$BIN" $LM --n-layer -2 --block-size 8
  case_refused "--n-head 32 --n-embd 16 (more heads than channels)" "--n-head" -- "$BIN" $LM --n-head 32 --n-embd 16 --block-size 8
  case_refused "--block-size 0" "--block-size" -- "$BIN" $LM --block-size 0
  case_refused "--block-size 1.5" "--block-size" -- "$BIN" $LM --block-size 1.5
  case_refused "--n-embd 65536 --n-layer 48: 2.4 T parameters' state" "memory" -- "$BIN" $LM --n-embd 65536 --n-head 64 --n-layer 48 --block-size 8
  case_refused "--n-layer 100000 (1.2 million tensors, state beyond memory)" "memory" -- "$BIN" $LM --n-layer 100000 --n-embd 128 --block-size 8
  case_refused "--vocab-size 2^31" "--vocab-size" -- "$BIN" $LM --vocab-size 2147483648 --block-size 8
  case_refused "--bench --model gpt --n-embd 20 --n-head 3" "--n-head" -- "$BIN" --device cpu --threads 1 --bench --model gpt --n-embd 20 --n-head 3
  case_refused "--bench --model gpt: activations beyond memory" "memory" -- "$BIN" --device cpu --threads 1 --bench --model gpt --block-size 65536 --batch-size 512
  case_refused "--model GPT (capitals)" "--model|GPT" -- "$BIN" ${LM/--model gpt/--model GPT} --block-size 8
  case_refused "--model gpt with --layers" "--layers" -- "$BIN" $LM --block-size 8 --layers 4,8,3
  case_refused "--model gpt with --activation gelu" "--activation" -- "$BIN" $LM --block-size 8 --activation gelu
  case_refused "--model gpt with --loss mse" "--loss" -- "$BIN" $LM --block-size 8 --loss mse
  case_refused "--model gpt on CSV data" "gpt" -- "$BIN" $D --model gpt --steps 2
  case_refused "--n-layer with the MLP" "--n-layer" -- "$BIN" $D --n-layer 2 --steps 2
  case_runs "--n-embd 6 --n-head 2 (head size 3, odd widths)" "done:" 0 -- "$BIN" $LM --n-embd 6 --n-head 2 --n-layer 1 --block-size 8
  case_runs "--n-embd 16 --n-head 16 (head size 1)" "done:" 0 -- "$BIN" $LM --n-embd 16 --n-head 16 --n-layer 1 --block-size 8
}
