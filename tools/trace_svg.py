#!/usr/bin/env python3
"""Draws one step of ./train --trace files as an SVG timeline.

    tools/trace_svg.py trace.json trace.json.rank1 -o docs/trace-2rank.svg

One lane per rank and stream (compute, communication); kernels blue,
collectives orange (labelled when wide enough). --step and --entry pick
the run drawn (default: step 1's micro_step and opt_step).
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="+")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--step", type=int, default=1)
    ap.add_argument("--width", type=int, default=1100)
    args = ap.parse_args()
    lanes = []
    for path in args.traces:
        ev = [e for e in json.load(open(path))["traceEvents"]
              if e["ph"] == "X" and e["args"]["step"] == args.step]
        if not ev:
            sys.exit(f"{path}: no launches of step {args.step}")
        pid = ev[0]["pid"]
        for tid, name in ((0, "compute"), (1, "communication")):
            lanes.append((f"rank {pid} {name}", [e for e in ev if e["tid"] == tid]))
    t0 = min(e["ts"] for _, es in lanes for e in es)
    t1 = max(e["ts"] + e["dur"] for _, es in lanes for e in es)
    left, lane_h, top = 150, 34, 30
    W = args.width
    scale = (W - left - 20) / (t1 - t0)
    H = top + lane_h * len(lanes) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="10" y="18" font-size="13">shardc --trace, 2 ranks (--mesh 2), '
           f'step {args.step}: micro_step then opt_step, {(t1 - t0) / 1e3:.1f} ms</text>']
    for i, (name, es) in enumerate(lanes):
        y = top + i * lane_h
        out.append(f'<text x="10" y="{y + 20}">{name}</text>')
        out.append(f'<line x1="{left}" y1="{y + lane_h - 2}" x2="{W - 20}" '
                   f'y2="{y + lane_h - 2}" stroke="#ddd"/>')
        for e in es:
            x = left + (e["ts"] - t0) * scale
            w = max(e["dur"] * scale, 0.5)
            coll = e["cat"] == "collective"
            color = "#e8871e" if coll else "#3b76c4"
            label = e["name"] + (f' {e["args"]["bytes"]} B' if coll else "")
            out.append(f'<rect x="{x:.2f}" y="{y + 4}" width="{w:.2f}" height="{lane_h - 10}" '
                       f'fill="{color}"><title>{label}: {e["dur"]:.0f} us</title></rect>')
            if w > 70:
                out.append(f'<text x="{x + 3:.1f}" y="{y + 21}" fill="white">{e["name"]}</text>')
    y = top + lane_h * len(lanes) + 20
    for k in range(6):
        t = (t1 - t0) * k / 5
        x = left + t * scale
        out.append(f'<text x="{x:.1f}" y="{y}" text-anchor="middle">{t / 1e3:.1f} ms</text>')
    out.append("</svg>")
    with open(args.output, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
