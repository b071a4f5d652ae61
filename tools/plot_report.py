#!/usr/bin/env python3
"""Draws the charts of an `offgen compare` report and writes report.html.

Usage: plot_report.py RESULTS_JSON REPORT_HTML

Reads results.json (written by `offgen compare`), draws charts against the KV budget with
matplotlib — generated tokens/s (median of the repeated runs, their spread as error bars),
largest batch whose KV fits, KV bytes moved per decode step, quality (perplexity of the
continuation tokens, greedy agreement with full) and each long-context task's score — plus, per
task, a heatmap of every cell's accuracy by context length and depth (copy: the mean
log-probability of the repeated span, as the Markdown report gives it), and writes one
self-contained HTML file: the report's answer first, then the charts inlined as PNG (two columns
on a wide page, one on a narrow one, each scaled to fit) and the results table.

Axes that measure an amount (tokens/s, sequences, bytes, accuracy) start at zero; quality axes
(perplexity, copy log-probability) are scaled to their data, where the differences are. A task
that full itself never gets right judges no policy: it gets a sentence instead of an all-zero
chart and heatmap. Each policy has its own marker and line style, so lines that coincide stay
distinguishable.

Exit status: 0 written; 2 bad arguments or input; 3 matplotlib is not installed (said on stderr
unless OFFGEN_PLOT_QUIET is set: offgen tries more than one python3 and warns itself only when
none could draw).
"""

import base64
import html
import io
import json
import math
import os
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def budget_share(cells):
    """x of a cell: its budget C as a share of full's (budgets given as fractions and as token
    counts land on one axis)."""
    full = next((c["budget_tokens"] for c in cells if c["policy"] == "full"), 0)
    return lambda c: c["budget_tokens"] / full if full else c["kv_budget"]


def series(cells, value):
    """{policy: ([budget shares], [values])} for the non-full policies, sorted by budget."""
    x_of = budget_share(cells)
    out = {}
    for c in cells:
        if c["policy"] == "full" or "error" in c:
            continue
        v = value(c)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        xs, ys = out.setdefault(c["policy"], ([], []))
        xs.append(x_of(c))
        ys.append(v)
    for policy, (xs, ys) in out.items():
        order = sorted(range(len(xs)), key=lambda i: xs[i])
        out[policy] = ([xs[i] for i in order], [ys[i] for i in order])
    return out


def full_value(cells, value):
    for c in cells:
        if c["policy"] == "full" and "error" not in c:
            return value(c)
    return None


def throughput(c):
    t = c.get("throughput", {})
    return None if t.get("error") else t.get("generated_tokens_per_second")


def largest_batch(c):
    return c.get("largest_batch")


def kv_moved_mib(c):
    t = c.get("throughput", {})
    return None if t.get("error") else t.get("kv_moved_per_step_bytes", 0) / 2**20


def perplexity(c):
    return c.get("quality", {}).get("perplexity")


def agreement(c):
    a = c.get("quality", {}).get("greedy_agreement_with_full")
    return None if a is None else 100.0 * a


# (marker, line style) per policy, in order of appearance: coinciding lines stay visible.
STYLES = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", "-"), ("P", "--"), ("X", "-.")]


def throughput_spread(c):
    """(low, high) of the timed runs' generated tokens/s, or None."""
    runs = c.get("throughput", {}).get("generated_tokens_per_second_runs") or []
    return (min(runs), max(runs)) if len(runs) > 1 else None


def png(plt, fig):
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def chart(plt, cells, value, title, ylabel, spread=None, from_zero=True,
          xlabel="KV budget C as a share of full's cache (prompt + generation)"):
    if not series(cells, value) and full_value(cells, value) is None:
        return None  # nothing measured (e.g. no --eval texts)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    x_of = budget_share(cells)
    for i, (policy, (xs, ys)) in enumerate(sorted(series(cells, value).items())):
        marker, style = STYLES[i % len(STYLES)]
        ax.plot(xs, ys, marker=marker, linestyle=style, linewidth=2, markersize=7 - i % 3,
                label=policy)
        if spread:
            for c in cells:
                if c["policy"] != policy or "error" in c:
                    continue
                lo_hi, v = spread(c), value(c)
                if lo_hi and v is not None:
                    ax.errorbar([x_of(c)], [v], yerr=[[v - lo_hi[0]], [lo_hi[1] - v]],
                                color="gray", capsize=3, linewidth=1)
    full = full_value(cells, value)
    if full is not None:
        ax.axhline(full, color="black", linestyle="--", linewidth=1.2, label="full")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_xlim(left=0)
    if from_zero:
        ax.set_ylim(bottom=0)
    else:
        ax.margins(y=0.15)  # scaled to the data: quality differences are small next to zero
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return png(plt, fig)


def task_names(results):
    return results.get("tasks", {}).get("names", [])


def pooled_task(c, name):
    """A cell's task pooled over lengths and depths: accuracy in %, or for copy the mean
    log-probability of the repeated span (nats, higher is better), the Markdown report's sign."""
    rows = [t for t in c.get("tasks", []) if t["task"] == name]
    if not rows:
        return None
    if name == "copy":
        scored = sum(t.get("scored_tokens", 0) for t in rows)
        if not scored:
            return None
        return sum(t["mean_logprob"] * t["scored_tokens"] for t in rows
                   if t.get("mean_logprob") is not None) / scored
    samples = sum(t["samples"] for t in rows)
    return 100.0 * sum(t["correct"] for t in rows) / samples if samples else None


def cell_label(c):
    return "full" if c["policy"] == "full" else f"{c['policy']} {c['kv_budget']:g}"


def judges_no_policy(results, name):
    """Whether full gets none of the task's samples right (copy always measures)."""
    if name == "copy":
        return False
    full = full_value(results["cells"], lambda c: pooled_task(c, name))
    return full is not None and full == 0


def heatmaps(plt, results, name):
    """One small heatmap per cell: accuracy (%) by length (rows) and depth (columns); for copy,
    the mean log-probability of the repeated span (nats)."""
    cells = [c for c in results["cells"] if "error" not in c and c.get("tasks")]
    lengths = results["tasks"]["lengths"]
    depths = results["tasks"]["depths"]
    if not cells or not lengths or not depths:
        return None
    cols = min(4, len(cells))
    rows = (len(cells) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols, 2.8 * rows + 0.8), dpi=100,
                             squeeze=False, gridspec_kw={"hspace": 0.55, "wspace": 0.3})
    copy = name == "copy"
    low, top = 0.0, 100.0
    if copy:
        values = [t["mean_logprob"] for c in cells for t in c["tasks"]
                  if t["task"] == "copy" and t.get("mean_logprob") is not None]
        low, top = (min(values), max(values)) if values else (-1.0, 0.0)
        if low == top:
            low -= 1.0
    image = None
    for k, c in enumerate(cells):
        ax = axes[k // cols][k % cols]
        grid = [[float("nan")] * len(depths) for _ in lengths]
        for t in c["tasks"]:
            if t["task"] != name:
                continue
            i, j = lengths.index(t["length"]), depths.index(t["depth"])
            if copy:
                grid[i][j] = t["mean_logprob"] if t.get("mean_logprob") is not None else math.nan
            else:
                grid[i][j] = 100.0 * t["accuracy"]
        image = ax.imshow(grid, vmin=low, vmax=top, cmap="viridis", aspect="auto",
                          origin="lower")
        ax.set_title(cell_label(c), fontsize=9)
        ax.set_xticks(range(len(depths)), [f"{d:g}" for d in depths], fontsize=7)
        ax.set_yticks(range(len(lengths)), [str(n) for n in lengths], fontsize=7)
        if k % cols == 0:
            ax.set_ylabel("length", fontsize=8)
        if k // cols == rows - 1:
            ax.set_xlabel("depth", fontsize=8)
    for k in range(len(cells), rows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.suptitle(f"{name}: " + ("mean log-probability of the repeated span (nats, higher is "
                                "better)" if copy
                                else "accuracy (%) by context length and depth"), fontsize=10)
    fig.colorbar(image, ax=axes, shrink=0.8)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def fmt(value, digits):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def table(cells):
    names = sorted({t["task"] for c in cells for t in c.get("tasks", [])})
    head = ("<tr><th>policy</th><th>budget</th><th>C</th><th>total tok/s (median)</th>"
            "<th>decode tok/s</th><th>KV/seq MiB</th><th>largest batch</th>"
            "<th>KV moved/step MiB</th><th>mean logprob</th><th>perplexity</th>"
            "<th>agreement %</th>"
            + "".join(f"<th>{html.escape(n)}{' log-prob' if n == 'copy' else ' %'}</th>"
                      for n in names) + "</tr>")
    rows = []
    for c in cells:
        budget = "whole" if c["policy"] == "full" else f"{c['kv_budget']:g}"
        if "error" in c:
            rows.append(f"<tr><td>{c['policy']}</td><td>{budget}</td><td colspan={9 + len(names)}>"
                        f"{html.escape(c['error'])}</td></tr>")
            continue
        t = c["throughput"]
        q = c["quality"]
        speed = "does not fit" if t.get("error") else fmt(t["generated_tokens_per_second"], 1)
        rows.append(
            "<tr>" + "".join(f"<td>{v}</td>" for v in [
                c["policy"], budget, c["budget_tokens"], speed,
                fmt(t.get("decode_tokens_per_second"), 1),
                fmt(c["kv_per_sequence_bytes"] / 2**20, 2), c["largest_batch"],
                fmt(kv_moved_mib(c), 2), fmt(q.get("mean_logprob"), 4),
                fmt(q.get("perplexity"), 3), fmt(agreement(c), 1)
            ] + [fmt(pooled_task(c, n), 3 if n == "copy" else 1) for n in names]) + "</tr>")
    return "<table>" + head + "".join(rows) + "</table>"


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if not os.environ.get("OFFGEN_PLOT_QUIET"):
            print("matplotlib is not installed (Debian: python3-matplotlib)", file=sys.stderr)
        return 3
    try:
        results = load(argv[1])
        cells = results["cells"]
    except (OSError, ValueError, KeyError) as e:
        print(f"{argv[1]}: not an offgen compare results file: {e}", file=sys.stderr)
        return 2
    case = results["throughput_case"]
    charts = [
        chart(plt, cells, throughput, "Throughput (median of the runs, bars: their spread)",
              "generated tokens/s", spread=throughput_spread),
        chart(plt, cells, largest_batch,
              f"Largest batch whose KV fits in {results['kv_memory_bytes'] / 2**30:.1f} GiB",
              "sequences"),
        chart(plt, cells, kv_moved_mib, "KV bytes moved per decode step", "MiB"),
        chart(plt, cells, perplexity, "Quality: perplexity of the continuation", "perplexity",
              from_zero=False),
    ]
    if any(agreement(c) is not None for c in cells):
        charts.append(chart(plt, cells, agreement, "Quality: greedy agreement with full",
                            "% of tokens"))
    judged = [n for n in task_names(results) if not judges_no_policy(results, n)]
    for name in judged:
        charts.append(chart(plt, cells, lambda c, n=name: pooled_task(c, n),
                            f"{name}: " + ("mean log-probability of the repeated span"
                                           if name == "copy"
                                           else "accuracy over all lengths and depths"),
                            "nats (higher is better)" if name == "copy" else "% correct",
                            from_zero=name != "copy"))
    charts = [c for c in charts if c]
    maps = [m for m in (heatmaps(plt, results, name) for name in judged) if m]
    unjudged = "".join(
        f"<p><strong>{html.escape(n)}</strong>: full itself retrieves none of its samples at "
        "these lengths, so this task judges no policy here (no chart or heatmap is drawn); a "
        "model that uses more context, or shorter lengths, would.</p>"
        for n in task_names(results) if judges_no_policy(results, n))
    images = "".join(f'<img alt="chart" src="data:image/png;base64,{c}">' for c in charts)
    incomplete = ""
    if not results.get("complete", True):
        incomplete = (f"<p><strong>Incomplete:</strong> {len(cells)} of "
                      f"{results.get('cells_planned', '?')} cells finished (the run was "
                      "stopped).</p>")
    answer = html.escape(results.get("answer", ""))
    answer = answer.replace("**", "<strong>", 1).replace("**", "</strong>", 1)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>offgen compare: {html.escape(results['model'])}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
.charts {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 560px), 1fr));
  gap: 0.5em; max-width: 1500px; }}
img {{ border: 1px solid #ddd; max-width: 100%; height: auto; box-sizing: border-box; }}
.table-wrap {{ overflow-x: auto; }}
table {{ border-collapse: collapse; margin-top: 1em; }}
td, th {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }}
</style></head><body>
<h1>KV policy comparison</h1>
<p>Model: {html.escape(results['model'])}<br>Device: {html.escape(results['device'])}<br>
Throughput case: batch {case['batch']}, prompt {case['prompt_len']}, gen {case['gen_len']}</p>
{incomplete}
<p>{answer}</p>
<div class="charts">{images}</div>
{unjudged}
{"".join(f'<p><img alt="heatmap" src="data:image/png;base64,{m}"></p>' for m in maps)}
<div class="table-wrap">{table(cells)}</div>
</body></html>
"""
    try:
        with open(argv[2], "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as e:
        print(f"cannot write {argv[2]}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
