"""compare_torch_table.py: compare_torch.py's results: the runs of every
cell, their medians, PyTorch's better thread configuration per cell, and the
Markdown table and CSV written from them (after every run, so a run cut
short still leaves the table of what finished). MLP rows are in samples/s;
GPT rows (a model with a "gpt" shape) in tokens/s, in a table of their own
with PyTorch's MFU beside ours."""
import csv
import statistics

from ddp_tools.common import tool_files
from ddp_tools.torch_ref import torch_thread_configs

SIDES = ("ours", "eager", "compile")


def fmt_rate(v):
    return "" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:.3g}")


def fmt_mfu(v):
    return f"{100 * v:.1f}%" if v is not None else "n/a"


def is_gpt(spec):
    return "gpt" in spec


def rate_key(spec):
    """The figure a row is in: tokens/s for a GPT (windows differ in T), else samples/s."""
    return "tokens_per_s" if is_gpt(spec) else "samples_per_s"


def gpt_text(spec):
    """'GPT 4x4x128 T128 V256': layers x heads x width, context, vocabulary."""
    g = spec["gpt"]
    return f"GPT {g['n-layer']}x{g['n-head']}x{g['n-embd']} T{g['block-size']} V{g['vocab-size']}"


class Results:
    """runs[(model, ranks, side, configuration)] = list of run records, each
    with a "status" ("ok" with "samples_per_s", or "failed", "timeout",
    "n/a", "skipped"). Ours has configuration "", and so has PyTorch on
    CUDA; on CPU each PyTorch side has one entry per distinct configuration.

    args: compare_torch's parsed flags; models: its MODELS; configs: the
    (model, ranks) cells in table order; torch_configs(n), threads_for(n),
    steps_for(m): as compare_torch defines them; header: the run's facts,
    written above the table."""

    def __init__(self, args, models, configs, torch_configs, threads_for, steps_for, header):
        self.args, self.models, self.configs, self.header = args, models, configs, header
        self.torch_configs, self.threads_for, self.steps_for = torch_configs, threads_for, steps_for
        self.torch_version = ""
        self.runs = {}
        for m, n in configs:
            self.runs[(m, n, "ours", "")] = []
            for side in SIDES[1:]:
                for c, _ in torch_configs(n):
                    self.runs[(m, n, side, c)] = []

    def cell(self, m, n, side, tconf=""):
        """(median rate or None, the ok runs or a status text, how many
        succeeded); the rate is samples/s, or tokens/s for a GPT."""
        runs = self.runs[(m, n, side, tconf)]
        key = rate_key(self.models[m])
        ok = [r for r in runs if r["status"] == "ok" and r.get(key) is not None]
        if ok:
            return statistics.median(r[key] for r in ok), ok, len(ok)
        statuses = [r["status"] for r in runs]
        for s in ("n/a", "timeout", "failed", "skipped"):
            if s in statuses:
                return None, s, 0
        return None, "", 0

    def torch_cell(self, m, n, mode):
        """The better configuration's cell: (rate, status text, runs that
        succeeded, its name, {every name: its median})."""
        cells = {c: self.cell(m, n, mode, c) for c, _ in self.torch_configs(n)}
        medians = {}
        for c, aliases in self.torch_configs(n):
            for name in [c] + aliases:
                medians[name] = cells[c][0]
        name, v = torch_thread_configs.best({c: cells[c][0] for c in cells})
        if name is None:  # no figure anywhere: the first configuration's status says why
            first = next(iter(cells.values()))
            return None, first[1], 0, "", medians
        return v, None, cells[name][2], name, medians

    def config_note(self, name, n, medians):
        """'blas (intra 13,812)': the winner, the others' medians beside it."""
        if not name:
            return ""
        aliases = dict(self.torch_configs(n)).get(name, [])
        won = " = ".join([name] + aliases) + (f" at {self.threads_for(n)} thread(s)" if aliases else "")
        others = [f"{c} {fmt_rate(v) if v is not None else '-'}" for c, v in medians.items()
                  if c != name and c not in aliases]
        return won + (f" ({', '.join(others)})" if others else "")

    def ours_mfu(self, m, n):
        return self.median_mfu(m, n, "ours", "")

    def median_mfu(self, m, n, side, tconf):
        ok = [r for r in self.runs[(m, n, side, tconf)] if r["status"] == "ok" and r.get("mfu") is not None]
        return statistics.median(r["mfu"] for r in ok) if ok else None

    def rows(self):
        args = self.args
        rows = []
        for m, n in self.configs:
            spec = self.models[m]
            unit = rate_key(spec)
            ours_v, ours_info, ours_n = self.cell(m, n, "ours")
            gpt = is_gpt(spec)
            row = {"model": m, "layers": gpt_text(spec) if gpt else spec["layers"].replace(",", "-"),
                   "loss": "xent" if gpt else spec["loss"],
                   "batch_per_rank": spec["batch"][args.device], "device": args.device, "ranks": n,
                   "threads_per_rank": self.threads_for(n) if args.device == "cpu" else "",
                   "unit": unit.replace("_per_s", "/s"),
                   f"ours_{unit}": ours_v, "ours_n": ours_n,
                   "ours_cell": fmt_rate(ours_v) if ours_v is not None else ours_info,
                   "ours_mfu": self.ours_mfu(m, n)}
            for mode in ("eager", "compile"):
                if mode in args.mode_list:
                    v, info, k, name, medians = self.torch_cell(m, n, mode)
                else:
                    v, info, k, name, medians = None, "not run", 0, "", {}
                row[f"torch_{mode}_{unit}"] = v
                row[f"torch_{mode}_n"] = k
                row[f"torch_{mode}_cell"] = fmt_rate(v) if v is not None else info
                row[f"ratio_{mode}"] = ours_v / v if (ours_v and v) else None
                row[f"torch_{mode}_threads"] = name
                row[f"torch_{mode}_threads_cell"] = self.config_note(name, n, medians)
                if gpt:
                    row[f"torch_{mode}_mfu"] = self.median_mfu(m, n, mode, name) if name else None
                if args.device == "cpu":  # every configuration's median, so the choice is visible
                    for c in args.torch_thread_configs:
                        row[f"torch_{mode}_{c}_{unit}"] = medians.get(c)
            rows.append(row)
        return rows

    def table(self, rows):
        """The Markdown tables: the MLP rows (samples/s), then the GPT rows
        (tokens/s, both sides' MFU), each only when it has rows. The threads
        columns on CPU only: on CUDA PyTorch runs one configuration, the
        defaults."""
        on_cpu = self.args.device == "cpu"
        th = lambda text: f" {text} |" if on_cpu else ""

        def with_n(text, k):
            return f"{text} (n={k})" if 0 < k < self.args.repeats else text

        ratio = lambda x: f"{x:.2f}" if x is not None else ""
        tables = []
        mlp_rows = [r for r in rows if r["unit"] == "samples/s"]
        if mlp_rows:
            lines = ["| model | batch/rank | device | ranks | ours samples/s | PyTorch eager samples/s |"
                     + th("eager threads") + " ours/eager | PyTorch compile samples/s |" + th("compile threads")
                     + " ours/compile | ours MFU |",
                     "| --- | ---: | --- | ---: | ---: | ---: |" + th("---") + " ---: | ---: |" + th("---")
                     + " ---: | ---: |"]
            for r in mlp_rows:
                mfu = fmt_mfu(r["ours_mfu"])
                lines.append(f"| {r['model']}: {r['layers']} {r['loss']} | {r['batch_per_rank']} | {r['device']} | {r['ranks']} "
                             f"| {with_n(r['ours_cell'], r['ours_n'])} "
                             f"| {with_n(r['torch_eager_cell'], r['torch_eager_n'])} |{th(r['torch_eager_threads_cell'])}"
                             f" {ratio(r['ratio_eager'])} "
                             f"| {with_n(r['torch_compile_cell'], r['torch_compile_n'])} |{th(r['torch_compile_threads_cell'])}"
                             f" {ratio(r['ratio_compile'])} | {mfu} |")
            tables.append("\n".join(lines))
        gpt_rows = [r for r in rows if r["unit"] == "tokens/s"]
        if gpt_rows:
            lines = ["| model | windows/rank | device | ranks | ours tokens/s | PyTorch eager tokens/s |"
                     + th("eager threads") + " ours/eager | PyTorch compile tokens/s |" + th("compile threads")
                     + " ours/compile | ours MFU | eager MFU | compile MFU |",
                     "| --- | ---: | --- | ---: | ---: | ---: |" + th("---") + " ---: | ---: |" + th("---")
                     + " ---: | ---: | ---: | ---: |"]
            for r in gpt_rows:
                lines.append(f"| {r['model']}: {r['layers']} | {r['batch_per_rank']} | {r['device']} | {r['ranks']} "
                             f"| {with_n(r['ours_cell'], r['ours_n'])} "
                             f"| {with_n(r['torch_eager_cell'], r['torch_eager_n'])} |{th(r['torch_eager_threads_cell'])}"
                             f" {ratio(r['ratio_eager'])} "
                             f"| {with_n(r['torch_compile_cell'], r['torch_compile_n'])} |{th(r['torch_compile_threads_cell'])}"
                             f" {ratio(r['ratio_compile'])} | {fmt_mfu(r['ours_mfu'])} "
                             f"| {fmt_mfu(r.get('torch_eager_mfu'))} | {fmt_mfu(r.get('torch_compile_mfu'))} |")
            tables.append("\n".join(lines))
        return "\n\n".join(tables)

    def write(self, out, stem):
        """The table (returned); with --out also written to `out`, under the
        header's notes, and the rows to stem.csv."""
        args = self.args
        rows = self.rows()
        table = self.table(rows)
        if not stem:
            return table
        notes = [f"# ours vs PyTorch, {args.device}", ""]
        notes += [f"- {k}: {v}" for k, v in self.header.items()]
        if self.torch_version:
            notes.append(f"- torch: {self.torch_version}")
        notes.append("- steps (warm-up, timed) per model: " + ", ".join(
            f"{m} {self.steps_for(m)}" for m in args.model_list))
        notes.append(f"- cells: median samples/s (GPT rows: tokens/s) over {args.repeats} repeat(s), from each "
                     "run's median step time; (n=k): only k runs succeeded; ratio = ours / PyTorch (> 1: ours faster)")
        if any(is_gpt(self.models[m]) for m in args.model_list):
            notes.append("- GPT rows: tokens/s = windows/s x T; both sides AdamW (lr 2e-3, weight decay 0.1 on "
                         "tensors of rank >= 2), one resident batch of random token ids; PyTorch is "
                         "launch/torch_gpt.py's module (CPU: the faster of explicit and SDPA attention; "
                         "CUDA: scaled_dot_product_attention (flash), fused AdamW); "
                         "MFU from ours' FLOPs per token (6 x parameters less wpe + attention) on both sides")
        if getattr(args, "precision", "fp16") == "bf16":
            notes.append("- precision bf16: ours --precision bf16 (BF16 storage, FP32 GEMMs and sums, no loss "
                         "scaling) against torch.autocast(dtype=torch.bfloat16) with FP32 weights and no "
                         "GradScaler (launch/ddp_tools/torch_ref/torch_precision.py)")
            if args.device != "cuda":
                notes.append("- PyTorch cells: the thread configuration with the higher median (named in "
                             "'threads', the others' medians in brackets); ours/PyTorch is against it")
        elif args.device == "cuda":
            notes.append("- PyTorch on CUDA: FP16 autocast + GradScaler (init 65536, growth interval 2000), "
                         "SGD lr 0.05 momentum 0.9; MFU against 989 TFLOP/s (H100/H200 dense FP16)")
        else:
            notes.append("- PyTorch on CPU: plain FP32 (ours: FP16 storage, FP32 GEMMs); "
                         "compile n/a where the torch lacks torch.compile")
            notes.append("- PyTorch cells: the thread configuration with the higher median (named in "
                         "'threads', the others' medians in brackets); ours/PyTorch is against it")
            if "c" in args.model_list:
                notes.append("- model c on CPU uses batch 256 per rank (4096 on GPU)")
        writer = "compare_torch.py --out"  # in the output registry
        tool_files.write_text_atomic(out, f"--out {out}", "\n".join(notes) + "\n\n" + table + "\n", writer)
        keys = []  # every row's columns, in first-seen order (GPT rows have tokens/s and PyTorch MFU ones)
        for r in rows:
            keys += [k for k in r if not k.endswith("_cell") and k not in keys]

        def write_csv(f):
            w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
        tool_files.write_atomic(stem + ".csv", f"--out: {stem}.csv", write_csv, writer)
        return table
