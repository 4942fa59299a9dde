#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The dashboard renderer (tools/render-dashboard) against the chart's
dashboards, so that the two cannot drift apart:

  - every panel of charts/stackrelay/dashboards/*.json is evaluated by the
    renderer's PromQL subset over dashboard-metrics.json (scrapes of a real
    gateway and agent, written by `render-dashboard --save-fixture`) without
    error, and every query returns data: a metric the dashboard names that
    the binaries do not expose, or PromQL the renderer does not implement,
    fails here;
  - the subset computes what Prometheus computes for a few known cases
    (rate()'s extrapolation, a counter reset, or, one-to-one division) and
    refuses what it does not implement, naming it.

No processes, no root: runs in well under a second.
"""
import glob
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tools", "render-dashboard"))
import panels  # noqa: E402
import promql  # noqa: E402

failures = []


def check(ok, what):
    print("%s: %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def subset():
    store = promql.Store()
    for i in range(5):  # a counter growing 2/s, sampled every 3s, reset after the 4th sample
        store.add(100.0 + 3 * i, "c_total", {"pod": "a"}, 6.0 * i if i < 4 else 6.0)
        store.add(100.0 + 3 * i, "g", {"pod": "a", "x": "1"}, 10.0)
        store.add(100.0 + 3 * i, "h", {"pod": "a", "x": "1"}, 4.0)
    ev = promql.Evaluator(store)

    def at(expr, t):
        return ev.instant(promql.parse(expr), t)

    # Samples at 100..109 inside (97, 109]: increase 18 over 9s, extrapolated to 12s (to zero at 100).
    v = at("rate(c_total[12s])", 109.0)
    check(list(v.values()) == [18.0 / 9.0 * 9.0 / 12.0], "rate() extrapolates as Prometheus does (%s)" % v)
    # (103, 112]: 12, 18, then 6 after a reset: an increase of 6 + 6, over 6s extrapolated to 9s.
    v = at("increase(c_total[9s])", 112.0)
    check(abs(list(v.values())[0] - 12.0 * 9.0 / 6.0) < 1e-9, "a counter reset adds the value before it (%s)" % v)
    v = at("irate(c_total[12s])", 112.0)
    check(list(v.values()) == [2.0], "irate() after a reset is the new value over the interval (%s)" % v)
    v = at("sum(nope) or vector(0)", 112.0)
    check(v == {frozenset(): 0.0}, "or vector(0) fills an empty sum (%s)" % v)
    v = at("max by (pod) (g) / max by (pod) (h)", 112.0)
    check(v == {frozenset({("pod", "a")}): 2.5}, "vector / vector matches label sets one to one (%s)" % v)
    v = at('count by (x) (g{pod=~"a|b", x!="2"})', 112.0)
    check(v == {frozenset({("x", "1")}): 1.0}, "count by with regex matchers (%s)" % v)
    for expr, name in (("histogram_quantile(0.9, sum by (le) (rate(b[5m])))", "function histogram_quantile"),
                       ("a / on (pod) b", "modifier on"), ("a offset 5m", "modifier offset"),
                       ("max_over_time(a[5m:1m])", "function max_over_time"), ("topk(3, a)", "aggregation topk")):
        try:
            promql.parse(expr)
            check(False, "%s is refused" % expr)
        except promql.Unsupported as e:
            check(name in str(e), "%s is refused naming %s (%s)" % (expr, name, e))


def dashboards():
    with open(os.path.join(HERE, "dashboard-metrics.json")) as f:
        scrapes = json.load(f)
    store = panels.store_from_scrapes(scrapes)
    times = [t for tg in scrapes["targets"] for t, _ in tg["scrapes"]]
    step = scrapes["scrape_interval"]
    files = sorted(glob.glob(os.path.join(SRC, "charts", "stackrelay", "dashboards", "*.json")))
    check(bool(files), "the chart has dashboards")
    for path in files:
        with open(path) as f:
            dashboard = json.load(f)
        name = os.path.basename(path)
        var = panels.variables(dashboard, 4 * step)
        # `or vector(0)` would hide a metric that does not exist: each must be in the scrapes itself.
        named = set()
        for p in dashboard["panels"]:
            for t in p.get("targets", []):
                named |= promql.metric_names(promql.parse(promql.substitute(t["expr"], var)))
        missing = sorted(named - set(store.by_name))
        check(not missing, "%s: every metric it names is exposed by the gateway or agent (missing: %s)" % (
            name, ", ".join(missing) or "none"))
        try:
            evaluated = panels.evaluate(dashboard, store, min(times), max(times), step, step)
        except (promql.Unsupported, promql.ParseError) as e:
            check(False, "%s: every panel evaluates (%s)" % (name, e))
            continue
        for p in evaluated:
            if p["type"] == "row":
                continue
            if p["type"] == "table":
                check(bool(p["rows"]), "%s: table %r has rows" % (name, p["title"]))
                continue
            refs = {s["ref"] for s in p["series"]
                    if any(v is not None and math.isfinite(v) for _, v in s["points"][1:])}
            wanted = {t.get("refId") for t in p.get("targets", []) if not t.get("hide")}
            refs &= wanted
            check(refs == wanted, "%s: panel %r has data for every query (%s of %s)" % (
                name, p["title"], sorted(refs), sorted(wanted)))


def main():
    subset()
    dashboards()
    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
