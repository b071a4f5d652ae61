#!/usr/bin/env python3
"""Draws the charts of an `offgen compare` report and writes report.html.

Usage: plot_report.py RESULTS_JSON REPORT_HTML

Reads results.json (written by `offgen compare`), draws four charts against the KV budget with
matplotlib — generated tokens/s, largest batch whose KV fits, KV bytes moved per decode step, and
quality (perplexity of the continuation tokens, greedy agreement with full) — and writes one
self-contained HTML file with the charts inlined as PNG and the results table.

Exit status: 0 written; 2 bad arguments or input; 3 matplotlib is not installed.
"""

import base64
import html
import io
import json
import math
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


def chart(plt, cells, value, title, ylabel,
          xlabel="KV budget C as a share of full's cache (prompt + generation)"):
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    for policy, (xs, ys) in sorted(series(cells, value).items()):
        ax.plot(xs, ys, marker="o", linewidth=2, label=policy)
    full = full_value(cells, value)
    if full is not None:
        ax.axhline(full, color="black", linestyle="--", linewidth=1.2, label="full")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def fmt(value, digits):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def table(cells):
    head = ("<tr><th>policy</th><th>budget</th><th>C</th><th>total tok/s</th>"
            "<th>decode tok/s</th><th>KV/seq MiB</th><th>largest batch</th>"
            "<th>KV moved/step MiB</th><th>mean logprob</th><th>perplexity</th>"
            "<th>agreement %</th></tr>")
    rows = []
    for c in cells:
        budget = "whole" if c["policy"] == "full" else f"{c['kv_budget']:g}"
        if "error" in c:
            rows.append(f"<tr><td>{c['policy']}</td><td>{budget}</td><td colspan=9>"
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
            ]) + "</tr>")
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
        chart(plt, cells, throughput, "Throughput", "generated tokens/s"),
        chart(plt, cells, largest_batch,
              f"Largest batch whose KV fits in {results['kv_memory_bytes'] / 2**30:.1f} GiB",
              "sequences"),
        chart(plt, cells, kv_moved_mib, "KV bytes moved per decode step", "MiB"),
        chart(plt, cells, perplexity, "Quality: perplexity of the continuation", "perplexity"),
    ]
    if any(agreement(c) is not None for c in cells):
        charts.append(chart(plt, cells, agreement, "Quality: greedy agreement with full",
                            "% of tokens"))
    images = "".join(f'<img alt="chart" src="data:image/png;base64,{c}">' for c in charts)
    incomplete = ""
    if not results.get("complete", True):
        incomplete = (f"<p><strong>Incomplete:</strong> {len(cells)} of "
                      f"{results.get('cells_planned', '?')} cells finished (the run was "
                      "stopped).</p>")
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>offgen compare: {html.escape(results['model'])}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
.charts {{ display: grid; grid-template-columns: repeat(2, max-content); gap: 0.5em; }}
img {{ border: 1px solid #ddd; }}
table {{ border-collapse: collapse; margin-top: 1em; }}
td, th {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }}
</style></head><body>
<h1>KV policy comparison</h1>
<p>Model: {html.escape(results['model'])}<br>Device: {html.escape(results['device'])}<br>
Throughput case: batch {case['batch']}, prompt {case['prompt_len']}, gen {case['gen_len']}</p>
{incomplete}
<div class="charts">{images}</div>
{table(cells)}
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
