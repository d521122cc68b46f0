"""torch_thread_configs.py: the CPU thread configurations compare_torch.py
gives PyTorch, so that its cell is PyTorch at its best on these cores rather
than at one guess.

With T threads per rank (cores / ranks, or --threads):
  intra  torch.set_num_threads(T), OMP_NUM_THREADS=T, OPENBLAS_NUM_THREADS=T:
         torch's OpenMP intra-op pool and OpenBLAS's pool both T wide (what
         a user gets from set_num_threads alone, plus the BLAS variable).
  blas   torch.set_num_threads(1), OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=T:
         element-wise work on the calling thread, the GEMMs on OpenBLAS's own
         pool of T. Debian's torch calls OpenBLAS's sgemm for Linear, and
         OpenBLAS's pthreads pool is sized from its variable at load time,
         whatever set_num_threads says; so the two pools no longer take turns
         on the same cores (on a quiet 2-core machine model a went from 13.8k
         to about 15k samples/s this way).
At T = 1 the two are the same configuration; it is run once.
"""

# name -> what it sets, for the table's notes and --help
DESCRIPTIONS = {
    "intra": "torch.set_num_threads(T), OMP_NUM_THREADS=T, OPENBLAS_NUM_THREADS=T",
    "blas": "torch.set_num_threads(1), OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=T",
}
DEFAULT = "intra,blas"


def parse(text):
    """'intra,blas' -> ['intra', 'blas']; ValueError naming an unknown or
    repeated name, or an empty list."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ValueError(f"no configuration named; choose from {', '.join(DESCRIPTIONS)}")
    for name in names:
        if name not in DESCRIPTIONS:
            raise ValueError(f"unknown configuration '{name}'; choose from {', '.join(DESCRIPTIONS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"a configuration is named twice in '{text}'")
    return names


def threads(name, t):
    """(torch.set_num_threads and OMP_NUM_THREADS, OPENBLAS_NUM_THREADS) for
    configuration `name` at T = t threads per rank."""
    return (t, t) if name == "intra" else (1, t)


def describe(name, t):
    torch_t, blas_t = threads(name, t)
    return f"torch {torch_t}, OpenMP {torch_t}, OpenBLAS {blas_t}"


def distinct(names, t):
    """The configurations worth running at T = t, each with the later names
    that coincide with it there: [(name, [aliases])]. Running a duplicate
    would spend the budget, and taking the better of two runs of one
    configuration would only pick the luckier noise."""
    out = []
    for name in names:
        same = next((entry for entry in out if threads(entry[0], t) == threads(name, t)), None)
        if same is None:
            out.append((name, []))
        else:
            same[1].append(name)
    return out


def best(medians):
    """{name: median samples/s or None} -> (name, value) of the highest, or
    (None, None) when no configuration has a figure. Ties go to the first
    named (dicts keep their order)."""
    winner = (None, None)
    for name, value in medians.items():
        if value is not None and (winner[1] is None or value > winner[1]):
            winner = (name, value)
    return winner
