# SPDX-License-Identifier: Apache-2.0
"""The tests' one reader of Prometheus text (the agent's and the gateway's /metrics).

    text = metricslib.scrape(port)
    metricslib.parse(text)["stackrelay_agent_jit_frames_total{result=\"named\"}"]
    metricslib.total(text, "stackrelay_gateway_samples_accepted_total", component="otlp")

A series is keyed as it is written (name and labels, as the exporter printed
them); a family whose series carry labels is also summed under its bare name.
"""
import re
import urllib.request

_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = re.compile(r'\\(.)')


def scrape(port, host="127.0.0.1", path="/metrics", timeout=10):
    """The text of http://host:port/metrics; raises OSError when nothing answers."""
    with urllib.request.urlopen("http://%s:%d%s" % (host, port, path), timeout=timeout) as r:
        return r.read().decode()


def _labels(inner):
    out, pos = {}, 0
    while pos < len(inner):
        m = _LABEL.match(inner, pos)
        if not m:
            raise ValueError("malformed labels: {%s}" % inner)
        out[m.group(1)] = _UNESCAPE.sub(lambda e: "\n" if e.group(1) == "n" else e.group(1), m.group(2))
        pos = m.end()
    return out


def samples(text):
    """Every sample of the text: (family, {label: value}, value, key as written); comments skipped."""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        if "{" in key:
            family, _, rest = key.partition("{")
            labels = _labels(rest.rpartition("}")[0])
        else:
            family, labels = key, {}
        yield family, labels, float(value), key


def parse(text):
    """{series as written: value}, and each labelled family's sum under its bare name."""
    out = {}
    for family, _, value, key in samples(text):
        out[key] = value
        if key != family:
            out[family] = out.get(family, 0) + value
    return out


def sums(text, **labels):
    """{family: sum of its series that carry all the given labels}."""
    out = {}
    for family, have, value, _ in samples(text):
        if all(have.get(k) == v for k, v in labels.items()):
            out[family] = out.get(family, 0) + value
    return out


def total(text, family, **labels):
    """The sum of family's series that carry all the given labels; 0 when there is none."""
    return sums(text, **labels).get(family, 0.0)


def by_label(text, family, label):
    """{value of label: sample value} for the series of family."""
    return {have[label]: value for fam, have, value, _ in samples(text) if fam == family and label in have}
