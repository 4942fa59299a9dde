# SPDX-License-Identifier: Apache-2.0
"""A Grafana dashboard's panels evaluated over scraped samples (promql.py):
what each panel would show, as data for draw.py.

    store = panels.store_from_scrapes(scrapes)        # render-dashboard's JSON
    for p in panels.evaluate(dashboard, store, start, end, step, scrape_interval):
        p["type"], p["title"], p["series"] ...

Panel types: row, stat, timeseries, table (with the organize transformation).
Anything else in the dashboard — another panel type, a transformation, a
target that is not a Prometheus expression, a variable other than the
Prometheus data source and label_values queries — raises promql.Unsupported
naming it and the panel.
"""
import os
import re
import sys

import promql

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "integration"))
import metricslib  # noqa: E402


def store_from_scrapes(scrapes):
    """A promql.Store of every sample of scrapes: {"targets": [{"labels": {...}, "scrapes": [[t, text]]}]}.
    The target's labels are added to each series, as Prometheus adds a scrape target's."""
    store = promql.Store()
    for target in scrapes["targets"]:
        for t, text in target["scrapes"]:
            for family, labels, value, _ in metricslib.samples(text):
                merged = dict(labels)
                merged.update(target["labels"])
                store.add(float(t), family, merged, value)
    return store


def variables(dashboard, rate_interval):
    """The values the renderer gives the dashboard's variables: every option ("All") of a query
    variable, the interval Grafana's $__rate_interval would be."""
    out = {"__rate_interval": "%ds" % rate_interval}
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") == "datasource":
            out[v["name"]] = v.get("query", "prometheus")
        elif v.get("type") == "query" and v.get("includeAll"):
            out[v["name"]] = v.get("allValue") or ".*"
        else:
            raise promql.Unsupported("dashboard variable %s of type %s" % (v.get("name"), v.get("type")))
    return out


def legend(fmt, labels, expr):
    """A series' name as Grafana writes it: legendFormat with {{label}} filled, else its labels."""
    if fmt:
        return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt).strip()
    shown = {k: v for k, v in labels.items() if k != "__name__"}
    if not shown:
        return labels.get("__name__", expr)
    return "%s{%s}" % (labels.get("__name__", ""), ", ".join('%s="%s"' % kv for kv in sorted(shown.items())))


def _range(ev, tree, times):
    series = {}
    for t in times:
        v = ev.instant(tree, t)
        if isinstance(v, float):
            v = {frozenset(): v}
        for key, x in v.items():
            series.setdefault(key, []).append((t, x))
    return series


def _targets(panel):
    for target in panel.get("targets", []):
        if target.get("hide"):
            continue
        if "expr" not in target:
            raise promql.Unsupported("panel %r: a target without a Prometheus expr" % panel.get("title"))
        yield target


def evaluate(dashboard, store, start, end, step, scrape_interval):
    """[panel dict] with the dashboard panel's own keys plus "series" (timeseries, stat:
    [{"name", "points": [(t, v)]}]) or "rows"/"columns" (table)."""
    rate_interval = max(step + scrape_interval, 4 * scrape_interval)
    var = variables(dashboard, rate_interval)
    ev = promql.Evaluator(store)
    times = []
    t = start
    while t <= end + 1e-9:
        times.append(t)
        t += step
    out = []
    for panel in dashboard["panels"]:
        kind = panel.get("type")
        title = panel.get("title", "")
        p = dict(panel)
        if kind == "row":
            if panel.get("collapsed") and panel.get("panels"):
                raise promql.Unsupported("collapsed row %r" % title)
            out.append(p)
            continue
        if kind not in ("stat", "timeseries", "table"):
            raise promql.Unsupported("panel type %s (panel %r)" % (kind, title))
        for tr in panel.get("transformations", []):
            if tr.get("id") != "organize":
                raise promql.Unsupported("transformation %s (panel %r)" % (tr.get("id"), title))
        p["series"], rows = [], []
        for target in _targets(panel):
            expr = promql.substitute(target["expr"], var)
            try:
                tree = promql.parse(expr)
            except (promql.Unsupported, promql.ParseError) as e:
                raise type(e)("panel %r, target %s: %s" % (title, target.get("refId", "?"), e)) from None
            if kind == "table":
                if target.get("format") != "table" or not target.get("instant"):
                    raise promql.Unsupported("panel %r: a table of a range query" % title)
                v = ev.instant(tree, end)
                v = {frozenset(): v} if isinstance(v, float) else v
                rows += [dict(key, Value=x) for key, x in v.items()]
                continue
            for key, points in sorted(_range(ev, tree, times).items(), key=lambda kv: sorted(kv[0])):
                p["series"].append({"name": legend(target.get("legendFormat"), dict(key), expr),
                                    "points": points, "ref": target.get("refId")})
        if kind == "table":
            p["columns"], p["rows"] = _organize(panel, rows)
        out.append(p)
    return out


def _organize(panel, rows):
    """Columns and rows of a table panel: labels in name order, Time and Value last, as Grafana's
    table of an instant query, then the organize transformation's excludeByName and renameByName."""
    labels = sorted({k for r in rows for k in r if k not in ("Value", "__name__")})
    columns = ["Time"] + labels + ["Value"]
    exclude, rename = {}, {}
    for tr in panel.get("transformations", []):
        exclude.update(tr.get("options", {}).get("excludeByName", {}))
        rename.update(tr.get("options", {}).get("renameByName", {}))
    kept = [c for c in columns if not exclude.get(c)]
    if "Time" in kept:
        raise promql.Unsupported("panel %r: a table showing Time" % panel.get("title"))
    body = [[r.get(c, "") for c in kept] for r in sorted(rows, key=lambda r: [str(r.get(c, "")) for c in kept])]
    return [rename.get(c, c) for c in kept], body
