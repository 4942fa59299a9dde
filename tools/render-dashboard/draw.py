# SPDX-License-Identifier: Apache-2.0
"""Evaluated panels (panels.py) drawn as one HTML page of inline SVG, laid
out on Grafana's 24-column grid with its dark theme: rows, stat panels with
a sparkline, time series with axes and a legend table (the calculations the
panel asks for), tables. No scripts, no external resources."""
import html
import math
import time

CELL_H, MARGIN = 30, 8  # Grafana's grid: row unit height and gap, in pixels
PALETTE = ["#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9", "#705DA0",
           "#508642", "#CCA300"]
BG, PANEL, BORDER, TEXT, MUTED, GRID = "#111217", "#181b1f", "#2c3235", "#ccccdc", "#8e8e9e", "#2a2d33"
FONT = "font-family:Inter,Helvetica,Arial,sans-serif"


def _scaled(v, steps, base):
    for i in range(len(steps) - 1, 0, -1):
        if abs(v) >= base ** i:
            return v / base ** i, steps[i]
    return v, steps[0]


def _num(v, decimals=None):
    if decimals is None:
        a = abs(v)
        decimals = 0 if a >= 100 or a == int(a) else 1 if a >= 10 else 2
    return "%.*f" % (decimals, v)


def fmt(v, unit, decimals=None):
    """v as Grafana shows it in unit (short, bytes, reqps, percentunit, none)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "No data"
    if unit == "bytes":
        x, s = _scaled(v, ["B", "KiB", "MiB", "GiB", "TiB"], 1024)
        return "%s %s" % (_num(x, decimals), s)
    if unit == "percentunit":
        return "%s%%" % _num(v * 100, decimals)
    x, s = _scaled(v, ["", " K", " Mil", " Bil", " Tri"], 1000)
    text = _num(x, decimals) + s
    return text + " req/s" if unit == "reqps" else text


def _nice_ticks(lo, hi, n=4):
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    t = first
    while t <= hi + step * 1e-9:
        ticks.append(t)
        t += step
    return ticks, step


def _byte_ticks(hi, n=4):
    """Ticks at round numbers of the unit the maximum is shown in, as Grafana's bytes axis."""
    unit = 1024 ** max(0, min(4, int(math.log(hi, 1024)))) if hi >= 1 else 1
    ticks, step = _nice_ticks(0, hi / unit, n)
    return [t * unit for t in ticks], step * unit


def _esc(s):
    return html.escape(str(s), quote=True)


def _calc(points, name):
    vals = [v for _, v in points if v is not None and not math.isnan(v)]
    if not vals:
        return None
    return {"mean": sum(vals) / len(vals), "max": max(vals), "min": min(vals), "last": vals[-1],
            "lastNotNull": vals[-1]}.get(name)


def _frame(x, y, w, h, title, body, description=""):
    tip = ' title="%s"' % _esc(description) if description else ""
    return ('<div class="panel" style="left:%dpx;top:%dpx;width:%dpx;height:%dpx"%s>'
            '<div class="ptitle">%s</div>%s</div>' % (x, y, w, h, tip, _esc(title), body))


def _timeseries(p, w, h, t0, t1):
    unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
    custom = p.get("fieldConfig", {}).get("defaults", {}).get("custom", {})
    legend = p.get("options", {}).get("legend", {})
    calcs = legend.get("calcs", [])
    series = p["series"]
    if legend.get("sortBy"):
        # Grafana's legend sort (sortBy names a calc, "Max"; sortDesc): the series that moved come first.
        def key(s):
            v = _calc(s["points"], legend["sortBy"][0].lower() + legend["sortBy"][1:])
            return -math.inf if v is None else v
        series = sorted(series, key=key, reverse=bool(legend.get("sortDesc")))
    legend_rows = min(len(series), 6)
    legend_h = 17 * (legend_rows + 1 + (len(series) > legend_rows)) + 4
    gh = h - 32 - legend_h
    if not series:
        return '<div class="nodata" style="height:%dpx">No data</div>' % (h - 40)
    vals = [v for s in series for _, v in s["points"] if v is not None and math.isfinite(v)]
    lo, hi = min(0.0, min(vals or [0])), max(vals or [1])
    if hi <= lo:
        hi = lo + 1
    ticks, _ = _byte_ticks(hi) if unit == "bytes" and lo >= 0 else _nice_ticks(lo, hi)
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    left, right, top, bottom = 74, 10, 6, 20
    pw, ph = w - left - right - 16, gh - top - bottom
    X = lambda t: left + (t - t0) / (t1 - t0) * pw  # noqa: E731
    Y = lambda v: top + ph - (v - lo) / (hi - lo) * ph  # noqa: E731
    out = ['<svg width="%d" height="%d">' % (w - 16, gh)]
    for tk in ticks:
        out.append('<line x1="%d" x2="%d" y1="%.0f" y2="%.0f" stroke="%s" shape-rendering="crispEdges"/>' % (left, left + pw, Y(tk), Y(tk), GRID))
        out.append('<text x="%d" y="%.1f" text-anchor="end" class="ax">%s</text>' % (left - 6, Y(tk) + 4,
                                                                                      _esc(fmt(tk, unit))))
    span = t1 - t0
    tstep = next(s for s in (10, 15, 20, 30, 60, 120, 300, 600, 1800, 3600) if span / s <= 7)
    tk = math.ceil(t0 / tstep) * tstep
    while tk <= t1:
        out.append('<line x1="%.0f" x2="%.0f" y1="%d" y2="%d" stroke="%s" shape-rendering="crispEdges"/>' % (X(tk), X(tk), top, top + ph, GRID))
        out.append('<text x="%.1f" y="%d" text-anchor="middle" class="ax">%s</text>' % (
            X(tk), top + ph + 15, time.strftime("%H:%M:%S", time.gmtime(tk))))
        tk += tstep
    fill = custom.get("fillOpacity", 0) / 100.0
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = [(X(t), Y(v)) for t, v in s["points"] if v is not None and math.isfinite(v)]
        if not pts:
            continue
        line = " ".join("%.1f,%.1f" % q for q in pts)
        if fill:
            area = "%.1f,%.1f %s %.1f,%.1f" % (pts[0][0], Y(max(lo, 0)), line, pts[-1][0], Y(max(lo, 0)))
            out.append('<polygon points="%s" fill="%s" fill-opacity="%.2f"/>' % (area, color, fill))
        out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>' % (line, color))
    out.append("</svg>")
    head = "".join('<th>%s</th>' % _esc(c.capitalize() if c != "lastNotNull" else "Last *") for c in calcs)
    rows = []
    for i, s in enumerate(series[:legend_rows]):
        cells = "".join("<td>%s</td>" % _esc(fmt(_calc(s["points"], c), unit)) for c in calcs)
        rows.append('<tr><td class="lname"><span class="sw" style="background:%s"></span>%s</td>%s</tr>' % (
            PALETTE[i % len(PALETTE)], _esc(s["name"] or " "), cells))
    if len(series) > legend_rows:
        rows.append('<tr><td class="lname muted">+ %d more series</td></tr>' % (len(series) - legend_rows))
    out.append('<table class="legend"><tr><th></th>%s</tr>%s</table>' % (head, "".join(rows)))
    return "".join(out)


def _stat(p, w, h):
    unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
    steps = p.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps", [])
    calc = (p.get("options", {}).get("reduceOptions", {}).get("calcs") or ["lastNotNull"])[0]
    if not p["series"]:
        return '<div class="nodata" style="height:%dpx">No data</div>' % (h - 40)
    s = p["series"][0]
    value = _calc(s["points"], calc)
    color = PALETTE[0]
    for st in steps:
        if st.get("value") is None or (value is not None and value >= st["value"]):
            color = {"green": "#73BF69", "red": "#F2495C", "yellow": "#FADE2A", "orange": "#FF9830"}.get(
                st.get("color"), st.get("color", color))
    spark = ""
    vals = [v for _, v in s["points"] if v is not None and math.isfinite(v)]
    if p.get("options", {}).get("graphMode") == "area" and len(vals) > 1:
        lo, hi = min(vals), max(vals)
        hi = hi if hi > lo else lo + 1
        sw, sh = w - 16, h - 40
        t0, t1 = s["points"][0][0], s["points"][-1][0]
        pts = ["%.1f,%.1f" % ((t - t0) / (t1 - t0) * sw, sh - 4 - (v - lo) / (hi - lo) * sh * 0.45)
               for t, v in s["points"] if v is not None and math.isfinite(v)]
        spark = ('<svg class="spark" width="%d" height="%d"><polygon points="0,%d %s %d,%d" fill="%s" '
                 'fill-opacity="0.18"/><polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/></svg>'
                 % (sw, sh, sh, " ".join(pts), sw, sh, color, " ".join(pts), color))
    return '<div class="stat" style="height:%dpx;color:%s">%s<span>%s</span></div>' % (
        h - 40, color, spark, _esc(fmt(value, unit)))


def _table(p):
    head = "".join("<th>%s</th>" % _esc(c) for c in p["columns"])
    body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % _esc(fmt(c, "short") if isinstance(c, float) else c)
                                            for c in r) for r in p["rows"])
    return '<table class="table"><tr>%s</tr>%s</table>' % (head, body)


CSS = """
body{margin:0;background:%(bg)s;color:%(text)s;%(font)s;font-size:12px}
.top{height:48px;display:flex;align-items:center;padding:0 16px;gap:16px;border-bottom:1px solid %(border)s}
.top h1{font-size:17px;font-weight:500;margin:0}
.top .var{background:%(panel)s;border:1px solid %(border)s;padding:4px 8px;border-radius:2px}
.top .muted{margin-left:auto}
.muted{color:%(muted)s}
.grid{position:relative;margin:8px 16px}
.panel{position:absolute;box-sizing:border-box;background:%(panel)s;border:1px solid %(border)s;border-radius:2px;
 padding:0 8px;overflow:hidden}
.ptitle{height:32px;line-height:32px;font-weight:500;font-size:13px;white-space:nowrap}
.row{position:absolute;font-size:15px;font-weight:500;line-height:30px}
.ax{fill:%(muted)s;font-size:11px}
.legend{border-collapse:collapse;width:100%%;font-size:11.5px}
.legend th{color:%(muted)s;font-weight:500;text-align:right;padding:0 8px;line-height:17px}
.legend td{text-align:right;padding:0 8px;white-space:nowrap;line-height:17px}
.legend td.lname{text-align:left;width:100%%;overflow:hidden;max-width:300px;text-overflow:ellipsis}
.sw{display:inline-block;width:14px;height:4px;margin:0 6px 3px 0;vertical-align:middle;border-radius:1px}
.stat{position:relative;display:flex;align-items:center;justify-content:center;font-size:42px;font-weight:500}
.stat span{position:relative}
.spark{position:absolute;left:0;top:0}
.nodata{display:flex;align-items:center;justify-content:center;color:%(muted)s;font-size:15px}
.table{border-collapse:collapse;width:100%%}
.table th{text-align:left;color:#6e9fff;font-weight:500;padding:6px 8px;border-bottom:1px solid %(border)s}
.table td{padding:6px 8px;border-bottom:1px solid %(border)s}
""" % {"bg": BG, "text": TEXT, "font": FONT, "border": BORDER, "panel": PANEL, "muted": MUTED}


def page(dashboard, evaluated, t0, t1, width, note):
    """The whole page's HTML; its height in pixels (for the screenshot's window)."""
    col = (width - 32 + MARGIN) / 24.0
    parts, bottom = [], 0
    for p in evaluated:
        g = p["gridPos"]
        x, y = g["x"] * col, g["y"] * (CELL_H + MARGIN)
        w, h = g["w"] * col - MARGIN, g["h"] * CELL_H + (g["h"] - 1) * MARGIN
        bottom = max(bottom, y + h)
        if p["type"] == "row":
            parts.append('<div class="row" style="left:%dpx;top:%dpx;width:%dpx">%s</div>' % (x, y, w,
                                                                                              _esc(p["title"])))
            continue
        body = (_timeseries(p, w, h, t0, t1) if p["type"] == "timeseries" else
                _stat(p, w, h) if p["type"] == "stat" else _table(p))
        parts.append(_frame(x, y, w, h, p["title"], body, p.get("description", "")))
    when = "%s – %s UTC" % (time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0)), time.strftime("%H:%M:%S",
                                                                                              time.gmtime(t1)))
    variables = "".join('<span class="var">%s: All</span>' % _esc(v.get("label", v["name"]))
                        for v in dashboard.get("templating", {}).get("list", []) if v.get("type") == "query")
    doc = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>%s</title><style>%s</style></head><body>'
           '<div class="top"><h1>%s</h1>%s<span class="muted">%s &middot; %s</span></div>'
           '<div class="grid" style="height:%dpx">%s</div></body></html>' % (
               _esc(dashboard["title"]), CSS, _esc(dashboard["title"]), variables, _esc(when), _esc(note),
               bottom, "".join(parts)))
    return doc, int(bottom + 48 + 16 + 8)
