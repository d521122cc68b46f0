#!/bin/bash
# bitwise_compare.sh OLD NEW: train with both binaries and the same flags; cmp every saved weight file.
# (Issue #13: the model-agnostic core must train the MLP bit for bit as before.)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
old=$1 new=$2
out=/tmp/bitwise; rm -rf $out; mkdir -p $out
fails=0
run() {  # name np flags...
  name=$1 np=$2; shift 2
  for which in old new; do
    bin=$old; [ $which = new ] && bin=$new
    if [ $np = 1 ]; then $bin "$@" --save-weights $out/$name.$which > $out/$name.$which.log 2>&1
    else mpirun --oversubscribe -np $np $bin "$@" --save-weights $out/$name.$which > $out/$name.$which.log 2>&1; fi
    echo "$which rc=$?" >> $out/$name.rc
  done
  n=0; same=0
  for f in $out/$name.old/*.npy; do n=$((n+1)); cmp -s $f $out/$name.new/$(basename $f) && same=$((same+1)); done
  echo "$name: $same of $n weight files identical ($(tr '\n' ' ' < $out/$name.rc))"
  [ $same = $n ] && [ $n -gt 0 ] || fails=$((fails+1))
}
S="--data synthetic --layers 10,37,13,10 --loss mse --steps 40 --threads 1"
F="--data fashion-mnist --layers 784,100,30,10 --steps 30 --batch-size 64 --threads 1"
run syn1 1 $S
run syn1acc 1 $S --grad-accum 3
run syn2 2 $S
run syn2acc 2 $S --grad-accum 2
run fm1 1 $F --activation gelu
run fm2 2 $F
run fm2acc 2 $F --grad-accum 2 --clip-grad-norm 1.0 --weight-decay 1e-4
run fm1clip 1 $F --clip-grad-norm 0.5 --nesterov
echo "fails=$fails"
