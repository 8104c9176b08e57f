#!/usr/bin/env python3
"""Draws the open-loop latency curve as an SVG on standard output.

Input: the lines `viewline-bench --open-loop N --brief` prints — `max RATE`, then
`SHARE TARGET ACHIEVED P50 P99 P999 LAG` per share of the highest rate sustained
(latencies in µs). The curve: p50, p99 and p99.9 against the rate, on a log scale
for latency, with the goal lines of issue #54 (p99 < 2 ms, p99.9 < 10 ms at 50 %).
Standard library only: `./dev bench` runs it on a fresh machine.
"""
import math
import sys
from xml.sax.saxutils import escape


def main() -> None:
    path, sessions = sys.argv[1], sys.argv[2]
    maximum = 0.0
    rows = []
    with open(path) as source:
        for line in source:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "max":
                maximum = float(parts[1])
                continue
            share, target, achieved, p50, p99, p999, lag = (float(x) for x in parts[:7])
            rows.append((share, target, p50, p99, p999))
    width, height, left, right, top, bottom = 640, 400, 70, 20, 40, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    low, high = 10.0, 1_000_000.0  # 10 µs … 1 s

    def x(rate: float) -> float:
        return left + plot_w * (rate / maximum if maximum else 0)

    def y(micros: float) -> float:
        micros = min(max(micros, low), high)
        return top + plot_h * (1 - (math.log10(micros) - math.log10(low)) / (math.log10(high) - math.log10(low)))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
        ' font-family="sans-serif" font-size="12">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{left}" y="20" font-size="14">Open-loop latency, {escape(sessions)} sessions '
        f'(highest rate sustained {maximum:,.0f}/s)</text>',
    ]
    for micros, label in [(10, "10 µs"), (100, "100 µs"), (1000, "1 ms"), (10_000, "10 ms"), (100_000, "100 ms"), (1_000_000, "1 s")]:
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y(micros):.1f}" y2="{y(micros):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y(micros) + 4:.1f}" text-anchor="end">{label}</text>')
    for share in (0, 25, 50, 75, 90, 100):
        rate = maximum * share / 100
        out.append(f'<text x="{x(rate):.1f}" y="{height - bottom + 16}" text-anchor="middle">{share} %</text>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 10}" text-anchor="middle">rate, share of the highest sustained</text>')
    for micros, label in [(2000, "goal p99 2 ms"), (10_000, "goal p99.9 10 ms")]:
        out.append(f'<line x1="{x(maximum / 2):.1f}" x2="{x(maximum / 2) + 8:.1f}" y1="{y(micros):.1f}" y2="{y(micros):.1f}" stroke="#c00"/>')
        out.append(f'<text x="{x(maximum / 2) + 12:.1f}" y="{y(micros) + 4:.1f}" fill="#c00">{label}</text>')
    for index, (name, colour) in enumerate([("p50", "#1f77b4"), ("p99", "#ff7f0e"), ("p99.9", "#2ca02c")]):
        points = " ".join(f"{x(target):.1f},{y(row[2 + index]):.1f}" for row in rows for target in [row[1]])
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for row in rows:
            out.append(f'<circle cx="{x(row[1]):.1f}" cy="{y(row[2 + index]):.1f}" r="3" fill="{colour}"/>')
        out.append(f'<text x="{left + 10}" y="{top + 16 * index + 12}" fill="{colour}">{name}</text>')
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
