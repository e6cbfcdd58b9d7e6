"""Plots as inline SVG: the report opens in any browser with no plotting library installed."""

from __future__ import annotations

import math
from html import escape

W, H, PAD = 720, 300, 52
BOTTOM = H - PAD


def _frame(x_label: str, y_label: str, y_max: float, x_ticks: list[tuple[float, str]]) -> list[str]:
    parts = [f'<line x1="{PAD}" y1="{BOTTOM}" x2="{W - 10}" y2="{BOTTOM}" stroke="#333"/>',
             f'<line x1="{PAD}" y1="10" x2="{PAD}" y2="{BOTTOM}" stroke="#333"/>',
             f'<text x="{W // 2}" y="{H - 10}" text-anchor="middle" font-size="12">{escape(x_label)}</text>',
             f'<text x="14" y="{H // 2}" text-anchor="middle" font-size="12" transform="rotate(-90 14 {H // 2})">'
             f'{escape(y_label)}</text>']
    for k in range(5):
        y = BOTTOM - k / 4 * (BOTTOM - 10)
        parts.append(f'<text x="{PAD - 4}" y="{y + 4:.0f}" text-anchor="end" font-size="10">{_tick(y_max * k / 4)}</text>')
    for x, label in x_ticks:
        parts.append(f'<text x="{x:.0f}" y="{BOTTOM + 14}" text-anchor="middle" font-size="10">{escape(label)}</text>')
    return parts


def _tick(v: float) -> str:
    """A readable axis number: 12,500 or 12.5k, never 1.25e+04."""
    if v >= 10_000:
        return f"{v / 1000:,.0f}k"
    if v >= 10:
        return f"{v:,.0f}"
    return f"{v:.2g}"


def _nice(v: float) -> float:
    """The axis top: 1, 2, 4 or 5 times a power of ten, at least ``v`` (its quarters read well)."""
    e = 10 ** math.floor(math.log10(v))
    return next(m * e for m in (1, 2, 4, 5, 10) if m * e >= v)


def _svg(parts: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">'
            + "".join(parts) + "</svg>")


def latency_cdf(points: list[tuple[float, float]]) -> str:
    """``points``: (quantile, latency ms), on a log latency axis."""
    pts = [(q, max(ms, 0.001)) for q, ms in points]
    if not pts:
        return "<p>No deliveries to plot.</p>"
    lo = math.floor(math.log10(min(ms for _, ms in pts)))
    hi = max(math.ceil(math.log10(max(ms for _, ms in pts))), lo + 1)

    def x(ms: float) -> float:
        return PAD + (math.log10(ms) - lo) / (hi - lo) * (W - PAD - 10)

    ticks = [(x(10.0 ** e), f"{10.0 ** e:g}") for e in range(lo, hi + 1)]
    parts = _frame("end-to-end latency (ms, log scale)", "fraction delivered", 1.0, ticks)
    line = " ".join(f"{x(ms):.1f},{BOTTOM - q * (BOTTOM - 10):.1f}" for q, ms in pts)
    parts.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{line}"/>')
    return _svg(parts)


def throughput(series: list[dict], faults: list[dict], bucket: float = 1.0) -> str:
    """Messages per second (sent, accepted, received) in buckets of ``bucket`` seconds, the
    faults as dashed red lines. Sent is drawn last, dashed: it runs under accepted."""
    if not series:
        return "<p>No traffic to plot.</p>"
    t_max = max(max(s["t"] for s in series), max((f["at"] for f in faults), default=0)) + bucket
    y_max = _nice(max(max(s["sent"], s["accepted"], s["received"]) for s in series) or 1)

    def x(t: float) -> float:
        return PAD + t / t_max * (W - PAD - 10)

    def y(v: float) -> float:
        return BOTTOM - v / y_max * (BOTTOM - 10)

    label = "seconds since the first send" + (f" (in {bucket:g} s buckets)" if bucket != 1.0 else "")
    parts = _frame(label, "messages per second", y_max, [(x(t_max * k / 4), f"{t_max * k / 4:.3g}") for k in range(5)])
    styles = {"accepted": ("#2ca02c", ""), "received": ("#1f77b4", ""), "sent": ("#555555", ' stroke-dasharray="5 4"')}
    for n, (key, (colour, dash)) in enumerate(styles.items()):
        pts = " ".join(f"{x(s['t'] + bucket / 2):.1f},{y(s[key]):.1f}" for s in series)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5"{dash} points="{pts}"/>')
        parts.append(f'<text x="{W - 110}" y="{22 + 14 * n}" font-size="11" fill="{colour}">{key}</text>')
    for f in faults:
        xx = x(f["at"])
        parts.append(f'<line x1="{xx:.1f}" y1="10" x2="{xx:.1f}" y2="{BOTTOM}" stroke="#d62728" stroke-dasharray="4 3"/>')
        parts.append(f'<text x="{xx + 3:.1f}" y="{BOTTOM - 6}" font-size="10" fill="#d62728" '
                     f'transform="rotate(-90 {xx + 3:.1f} {BOTTOM - 6})">{escape(f["fault"])}</text>')
    return _svg(parts)
