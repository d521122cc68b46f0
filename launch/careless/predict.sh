# predict.sh: careless-user cases of --predict: outputs that are inputs
# (directly, through a link), features of the wrong width, dtype or rank,
# zero rows, non-finite features, outputs that exist or cannot be written,
# and more ranks than rows.

predict() {
  local P="--device cpu --threads 1 --layers 4,8,3 --init-weights $T/w0 --batch-size 8"
  npy x.npy float32 10 4
  guard x.npy
  case_refused "--predictions = --predict" "--predictions|input" -- "$BIN" $P --predict x.npy --predictions x.npy
  ln -sf x.npy xlink.npy
  guard x.npy
  case_refused "--predictions: a link to --predict" "--predictions|input" -- "$BIN" $P --predict x.npy --predictions xlink.npy
  ln -f x.npy xhard.npy
  guard x.npy
  case_refused "--predictions: a hard link of --predict" "--predictions|input" -- "$BIN" $P --predict x.npy --predictions xhard.npy
  guard w0/layer0.weight.npy
  case_refused "--predictions = an --init-weights file" "--predictions|input" -- "$BIN" $P --predict x.npy --predictions w0/layer0.weight.npy
  npy x5.npy float32 10 5
  case_refused "features 5 wide, the model's input is 4" "x5.npy|4" -- "$BIN" $P --predict x5.npy --predictions p.npy
  npy xi.npy int32 10 4
  case_refused "features as int32" "xi.npy|<i4" -- "$BIN" $P --predict xi.npy --predictions p.npy
  npy xh.npy float16 10 4
  case_refused "features as float16" "xh.npy|<f2" -- "$BIN" $P --predict xh.npy --predictions p.npy
  npy x8.npy uint8 10 4
  case_runs "features as uint8" "" 0 -- "$BIN" $P --predict x8.npy --predictions p8.npy
  npy x64.npy float64 10 4
  case_runs "features as float64" "" 0 -- "$BIN" $P --predict x64.npy --predictions p64.npy
  npy x0.npy float32 0 4
  case_runs "zero rows: an empty prediction array" "0 rows" 0 -- "$BIN" $P --predict x0.npy --predictions p0.npy
  check "… p0.npy holds int64 [0]" "shape (0,)" "$(/usr/bin/python3 -c 'import numpy as np; a = np.load("p0.npy"); print(a.dtype, a.shape)' 2>&1 | tail -1)" \
    "$(/usr/bin/python3 -c 'import numpy as np; a = np.load("p0.npy"); assert a.shape == (0,) and a.dtype == np.int64' 2>&1 | tail -1)"
  npy x1d.npy float32 4
  case_refused "a 1-D array" "x1d.npy" -- "$BIN" $P --predict x1d.npy --predictions p.npy
  npy x3d.npy float32 2 2 4
  case_refused "a 3-D array" "x3d.npy" -- "$BIN" $P --predict x3d.npy --predictions p.npy
  /usr/bin/python3 -c "import numpy as np; a = np.zeros((6, 4), 'float32'); a[3, 2] = np.nan; np.save('xnan.npy', a)"
  case_refused "a NaN feature" "xnan.npy|non-finite value (nan) in sample 3, feature 2" -- "$BIN" $P --predict xnan.npy --predictions p.npy
  /usr/bin/python3 -c "import numpy as np; np.save('xf.npy', np.asfortranarray(np.arange(40, dtype='float32').reshape(10, 4)))"
  case_refused "a Fortran-order array" "xf.npy|fortran_order" -- "$BIN" $P --predict xf.npy --predictions pf.npy
  : >x_empty.npy
  case_refused "an empty .npy" "x_empty.npy" -- "$BIN" $P --predict x_empty.npy --predictions p.npy
  echo "my notes" >notes.npy
  guard notes.npy
  case_refused "--predictions: my text file named p.npy" "--predictions|notes.npy" -- "$BIN" $P --predict x.npy --predictions notes.npy
  case_runs "--predictions: an earlier .npy (replaced)" "" 0 -- "$BIN" $P --predict x.npy --predictions p8.npy
  absent nodir
  case_refused "--predictions in a missing directory" "--predictions|nodir" -- "$BIN" $P --predict x.npy --predictions nodir/p.npy
  mkdir -p pdir.npy
  case_refused "--predictions is a directory" "--predictions|directory" -- "$BIN" $P --predict x.npy --predictions pdir.npy
  case_refused "--predictions /dev/full" "--predictions|/dev/full" -- "$BIN" $P --predict x.npy --predictions /dev/full
  case_refused "--predict without --predictions" "--predictions" -- "$BIN" $P --predict x.npy
  case_refused "--predict-output probs with --loss mse" "--predict-output probs|--loss xent" -- "$BIN" $P --loss mse --predict x.npy --predictions p.npy --predict-output probs
  case_refused "--predict-output softmax" "--predict-output|softmax" -- "$BIN" $P --predict x.npy --predictions p.npy --predict-output softmax
  case_refused "--predict without weights" "--predict|--init-weights" -- "$BIN" --device cpu --threads 1 --layers 4,8,3 --predict x.npy --predictions p.npy
  case_refused "--predict with --steps" "--steps" -- "$BIN" $P --predict x.npy --predictions p.npy --steps 3
  npy x2.npy float32 2 4
  run_bin "$BIN" $P --predict x2.npy --predictions p1.npy
  run_bin $MPI -np 3 "$BIN" $P --predict x2.npy --predictions p3.npy
  check "-np 3 on 2 rows: rank 2 has none" "exit 0, the 1-rank predictions" "exit $RC" \
    "$( ((RC == 0)) || echo "exit $RC")$(cmp -s p1.npy p3.npy || echo ' predictions differ')"
  case_refused "--predict a FIFO" "x.fifo|FIFO" -- bash -c "mkfifo x.fifo 2>/dev/null; '$BIN' $P --predict x.fifo --predictions p.npy"
}
