#!/usr/bin/env python3
"""Several runs' JSON logs (vkgpt train --log) as one SVG of loss against tokens: each run's
training loss (a moving mean over --window steps, the raw points faint) and its evaluations as
dots, in one colour per run, with a legend.

    scripts/loss-curves.py OUT.svg LABEL=run1.jsonl LABEL=run2.jsonl ... [--window 10]
(the path is what follows the last "=")
"""
import json
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"]


def load(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    if not rows:
        sys.exit(f"loss-curves: {path}: no rows")
    return rows


def main(argv):
    window, args = 10, []
    i = 0
    while i < len(argv):
        if argv[i] == "--window":
            window = int(argv[i + 1])
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) < 2 or any("=" not in a for a in args[1:]):
        sys.exit(__doc__)
    out, runs = args[0], [a.rsplit("=", 1) for a in args[1:]]
    data = [(label, load(path)) for label, path in runs]
    pts = [(r["tokens"], r["loss"]) for _, rows in data for r in rows]
    pts += [(r["tokens"], r["eval_loss"]) for _, rows in data for r in rows if "eval_loss" in r]
    x0, x1 = 0, max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    W, H, L, R, T, B = 720, 420, 60, 20, 30, 40

    def sx(x):
        return L + (W - L - R) * (x - x0) / max(x1 - x0, 1)

    def sy(y):
        return T + (H - T - B) * (y1 - y) / max(y1 - y0, 1e-9)

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
           f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle">tokens</text>',
           f'<text x="14" y="{H / 2}" transform="rotate(-90 14 {H / 2})" '
           f'text-anchor="middle">loss</text>']
    for k in range(5):
        y = y0 + (y1 - y0) * k / 4
        x = x0 + (x1 - x0) * k / 4
        svg.append(f'<text x="{L - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.2f}</text>')
        svg.append(f'<text x="{sx(x):.1f}" y="{H - B + 16}" text-anchor="middle">{x:.0f}</text>')
    for n, (label, rows) in enumerate(data):
        c = COLOURS[n % len(COLOURS)]
        raw = " ".join(f"{sx(r['tokens']):.1f},{sy(r['loss']):.1f}" for r in rows)
        svg.append(f'<polyline points="{raw}" fill="none" stroke="{c}" stroke-opacity="0.25"/>')
        mean = []
        for i in range(len(rows)):
            w = rows[max(0, i - window + 1):i + 1]
            mean.append((rows[i]["tokens"], sum(r["loss"] for r in w) / len(w)))
        line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in mean)
        svg.append(f'<polyline points="{line}" fill="none" stroke="{c}" stroke-width="2"/>')
        for r in rows:
            if "eval_loss" in r:
                svg.append(f'<circle cx="{sx(r["tokens"]):.1f}" cy="{sy(r["eval_loss"]):.1f}" '
                           f'r="4" fill="{c}"/>')
        ev = [r["eval_loss"] for r in rows if "eval_loss" in r]
        text = label + (f" (last eval {ev[-1]:.4f})" if ev else "")
        svg.append(f'<text x="{W - R - 8}" y="{T + 16 * n + 4}" text-anchor="end" '
                   f'fill="{c}">{text}</text>')
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
