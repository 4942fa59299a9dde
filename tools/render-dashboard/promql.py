# SPDX-License-Identifier: Apache-2.0
"""The part of PromQL that charts/stackrelay/dashboards/*.json uses, evaluated
over samples scraped into memory, so the dashboard can be drawn from real
metrics without Prometheus or Grafana.

    store = Store()
    store.add(t, "stackrelay_gateway_ready", {"pod": "gw-0"}, 1.0)
    ev = Evaluator(store, lookback=300)
    expr = parse('sum by (pod) (rate(x_total{ns=~"a|b"}[12s])) or vector(0)')
    ev.instant(expr, t)          # {frozenset(labels): value}

What is here: vector selectors with =, !=, =~, !~ matchers; range selectors
(only as a function argument); rate, irate, increase (Prometheus'
extrapolation and counter resets); vector(s); sum, min, max, avg and count
with by (...) or without (...); + - * / between scalars and vectors
(one-to-one on identical label sets); and, or, unless; parentheses and
unary minus. Anything else (on/ignoring, group_left, offset, @, subqueries,
other functions such as histogram_quantile) raises Unsupported naming it, so
a dashboard that outgrows the subset fails loudly instead of drawing wrong.
"""
import math
import re


class Unsupported(Exception):
    """The expression uses PromQL this evaluator does not implement."""


class ParseError(Exception):
    """The expression is not PromQL."""


# ---- lexing ----

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<bare_duration>(?:\d+(?:ms|s|m|h|d|w|y))+(?![a-zA-Z0-9_:]))
  | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?(?![a-zA-Z_:]))
  | (?P<duration>\[[^\]]*\])
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^(){},=<>@])
""", re.X)

_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def parse_duration(text):
    """Seconds of a Prometheus duration such as 5m, 1h30m or 250ms."""
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise ParseError("invalid duration %r" % text)
    return sum(int(n) * _DURATION_UNITS[u] for n, u in parts)


def _tokens(text):
    pos, out = 0, []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ParseError("unexpected %r at offset %d of %r" % (text[pos:pos + 10], pos, text))
        pos = m.end()
        kind = m.lastgroup
        if kind != "ws":
            out.append((kind, m.group(kind)))
    out.append(("end", ""))
    return out


# ---- the syntax tree: tuples, first element the node kind ----
#   ("num", v)  ("sel", name, [(label, op, value)])  ("range", sel, seconds)
#   ("call", fn, [args])  ("agg", op, "by"|"without"|None, [labels], expr)
#   ("bin", op, lhs, rhs)  ("neg", expr)

_AGGREGATIONS = {"sum", "min", "max", "avg", "count"}
_FUNCTIONS = {"rate", "irate", "increase", "vector"}
_SET_OPS = ("or", "and", "unless")


class _Parser:
    def __init__(self, text):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, k=0):
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def take(self, kind=None, value=None):
        tok = self.peek()
        if (kind and tok[0] != kind) or (value is not None and tok[1] != value):
            raise ParseError("expected %s at %r in %r" % (value or kind, tok[1] or "end", self.text))
        self.i += 1
        return tok

    def at(self, kind, value=None):
        tok = self.peek()
        return tok[0] == kind and (value is None or tok[1] == value)

    def parse(self):
        e = self.expr()
        self.take("end")
        return e

    # Precedence, lowest first: or; and, unless; comparisons; + -; * / %.
    def expr(self):
        e = self.and_expr()
        while self.at("ident", "or"):
            self.take()
            self.modifiers()
            e = ("bin", "or", e, self.and_expr())
        return e

    def and_expr(self):
        e = self.cmp_expr()
        while self.at("ident", "and") or self.at("ident", "unless"):
            op = self.take()[1]
            self.modifiers()
            e = ("bin", op, e, self.cmp_expr())
        return e

    def cmp_expr(self):
        e = self.add_expr()
        if self.peek()[0] == "op" and self.peek()[1] in ("==", "!=", "<", ">", "<=", ">="):
            raise Unsupported("comparison operator %s" % self.peek()[1])
        return e

    def add_expr(self):
        e = self.mul_expr()
        while self.at("op", "+") or self.at("op", "-"):
            op = self.take()[1]
            self.modifiers()
            e = ("bin", op, e, self.mul_expr())
        return e

    def mul_expr(self):
        e = self.unary()
        while self.at("op", "*") or self.at("op", "/") or self.at("op", "%"):
            op = self.take()[1]
            self.modifiers()
            e = ("bin", op, e, self.unary())
        if self.at("op", "^"):
            raise Unsupported("operator ^")
        return e

    def modifiers(self):
        """Vector matching modifiers after a binary operator: none are supported."""
        tok = self.peek()
        if tok[0] == "ident" and tok[1] in ("on", "ignoring", "group_left", "group_right", "bool"):
            raise Unsupported("binary operator modifier %s" % tok[1])

    def unary(self):
        if self.at("op", "-"):
            self.take()
            return ("neg", self.unary())
        if self.at("op", "+"):
            self.take()
            return self.unary()
        return self.postfix(self.primary())

    def postfix(self, e):
        tok = self.peek()
        if tok[0] == "duration":
            inner = tok[1][1:-1]
            if ":" in inner:
                raise Unsupported("subquery [%s]" % inner)
            if e[0] != "sel":
                raise ParseError("a range [%s] applies to a vector selector only, in %r" % (inner, self.text))
            self.take()
            e = ("range", e, parse_duration(inner.strip()))
        tok = self.peek()
        if tok == ("ident", "offset") or tok == ("op", "@"):
            raise Unsupported("modifier %s" % tok[1])
        return e

    def primary(self):
        kind, value = self.peek()
        if kind == "number":
            self.take()
            return ("num", float(value))
        if kind == "op" and value == "(":
            self.take()
            e = self.expr()
            self.take("op", ")")
            return e
        if kind == "op" and value == "{":
            return ("sel", None, self.matchers())
        if kind != "ident":
            raise ParseError("unexpected %r in %r" % (value or "end", self.text))
        if value in _AGGREGATIONS:
            return self.aggregation()
        if value in ("topk", "bottomk", "quantile", "stddev", "stdvar", "count_values", "group"):
            raise Unsupported("aggregation %s" % value)
        if self.peek(1) == ("op", "("):
            if value not in _FUNCTIONS:
                raise Unsupported("function %s" % value)
            self.take()
            self.take("op", "(")
            args = []
            if not self.at("op", ")"):
                args.append(self.expr())
                while self.at("op", ","):
                    self.take()
                    args.append(self.expr())
            self.take("op", ")")
            return ("call", value, args)
        self.take()
        return ("sel", value, self.matchers() if self.at("op", "{") else [])

    def grouping(self):
        mode = self.take()[1]
        self.take("op", "(")
        labels = []
        while not self.at("op", ")"):
            labels.append(self.take("ident")[1])
            if not self.at("op", ")"):
                self.take("op", ",")
        self.take("op", ")")
        return mode, labels

    def aggregation(self):
        op = self.take()[1]
        mode, labels = None, []
        if self.at("ident", "by") or self.at("ident", "without"):
            mode, labels = self.grouping()
        self.take("op", "(")
        e = self.expr()
        if self.at("op", ","):
            raise Unsupported("aggregation %s with a parameter" % op)
        self.take("op", ")")
        if mode is None and (self.at("ident", "by") or self.at("ident", "without")):
            mode, labels = self.grouping()
        return ("agg", op, mode, labels, e)

    def matchers(self):
        self.take("op", "{")
        out = []
        while not self.at("op", "}"):
            label = self.take("ident")[1]
            op = self.take("op")[1]
            if op not in ("=", "!=", "=~", "!~"):
                raise ParseError("invalid label matcher %s%s in %r" % (label, op, self.text))
            raw = self.take("string")[1]
            value = re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), raw[1:-1])
            out.append((label, op, value))
            if not self.at("op", "}"):
                self.take("op", ",")
        self.take("op", "}")
        return out


def parse(text):
    """The syntax tree of text; ParseError or Unsupported."""
    return _Parser(text).parse()


def metric_names(tree):
    """The metric names a tree selects."""
    kind = tree[0]
    if kind == "sel":
        return {tree[1]} if tree[1] else set()
    if kind in ("range", "neg"):
        return metric_names(tree[1])
    if kind == "call":
        return set().union(*(metric_names(a) for a in tree[2]))
    if kind == "agg":
        return metric_names(tree[4])
    if kind == "bin":
        return metric_names(tree[2]) | metric_names(tree[3])
    return set()


# ---- data ----

class Store:
    """Samples by series: {(name, frozenset(labels))): [(t, value)]}, appended in time order."""

    def __init__(self):
        self.series = {}
        self.by_name = {}

    def add(self, t, name, labels, value):
        key = (name, frozenset(labels.items()))
        if key not in self.series:
            self.series[key] = []
            self.by_name.setdefault(name, []).append(key)
        self.series[key].append((t, value))

    def select(self, name, matchers):
        """[(labels incl. __name__, samples)] of the series the selector picks."""
        keys = self.by_name.get(name, []) if name else list(self.series)
        out = []
        for key in keys:
            labels = dict(key[1])
            labels["__name__"] = key[0]
            if all(_matches(labels.get(l, ""), op, v) for l, op, v in matchers):
                out.append((labels, self.series[key]))
        return out


def _matches(have, op, want):
    if op == "=":
        return have == want
    if op == "!=":
        return have != want
    full = re.fullmatch(want, have) is not None
    return full if op == "=~" else not full


# ---- evaluation ----

def _key(labels):
    return frozenset((k, v) for k, v in labels.items() if k != "__name__")


class Evaluator:
    """Evaluates trees at instants over a Store, as Prometheus would at one step of a range query."""

    def __init__(self, store, lookback=300.0):
        self.store = store
        self.lookback = lookback

    def instant(self, tree, t):
        """{frozenset(labels): value} (an instant vector), or a float for a scalar expression."""
        return self.eval(tree, t)

    def eval(self, n, t):
        kind = n[0]
        if kind == "num":
            return n[1]
        if kind == "neg":
            v = self.eval(n[1], t)
            return -v if isinstance(v, float) else {k: -x for k, x in v.items()}
        if kind == "sel":
            out = {}
            for labels, samples in self.store.select(n[1], n[2]):
                s = _last_at(samples, t)
                if s is not None and t - s[0] <= self.lookback:
                    out[frozenset(labels.items())] = s[1]
            return out
        if kind == "range":
            raise ParseError("a range vector cannot be evaluated on its own; wrap it in rate(), irate() or increase()")
        if kind == "call":
            return self.call(n[1], n[2], t)
        if kind == "agg":
            return self.aggregate(n, t)
        if kind == "bin":
            return self.binary(n[1], self.eval(n[2], t), self.eval(n[3], t))
        raise ParseError("unknown node %r" % (kind,))

    def call(self, fn, args, t):
        if fn == "vector":
            if len(args) != 1:
                raise ParseError("vector() takes one argument")
            v = self.eval(args[0], t)
            if not isinstance(v, float):
                raise ParseError("vector() takes a scalar")
            return {frozenset(): v}
        if len(args) != 1 or args[0][0] != "range":
            raise ParseError("%s() takes one range vector" % fn)
        sel, rng = args[0][1], args[0][2]
        out = {}
        for labels, samples in self.store.select(sel[1], sel[2]):
            window = [s for s in samples if t - rng < s[0] <= t]
            v = _irate(window) if fn == "irate" else _extrapolated(window, t - rng, t, fn == "rate")
            if v is not None:
                out[_key(labels)] = v
        return out

    def aggregate(self, n, t):
        _, op, mode, labels, inner = n
        v = self.eval(inner, t)
        if isinstance(v, float):
            raise ParseError("%s() over a scalar" % op)
        groups = {}
        for key, x in v.items():
            d = dict(key)
            d.pop("__name__", None)
            if mode == "by":
                g = frozenset((k, d[k]) for k in labels if k in d)
            elif mode == "without":
                g = frozenset((k, w) for k, w in d.items() if k not in labels)
            else:
                g = frozenset()
            groups.setdefault(g, []).append(x)
        fns = {"sum": sum, "min": min, "max": max, "count": len, "avg": lambda xs: sum(xs) / len(xs)}
        return {g: float(fns[op](xs)) for g, xs in groups.items()}

    def binary(self, op, a, b):
        if op in _SET_OPS:
            if isinstance(a, float) or isinstance(b, float):
                raise ParseError("%s between scalars" % op)
            ka = {_key(dict(k)) for k in a}
            kb = {_key(dict(k)) for k in b}
            if op == "or":
                out = dict(a)
                out.update({k: x for k, x in b.items() if _key(dict(k)) not in ka})
                return out
            if op == "and":
                return {k: x for k, x in a.items() if _key(dict(k)) in kb}
            return {k: x for k, x in a.items() if _key(dict(k)) not in kb}
        if isinstance(a, float) and isinstance(b, float):
            return _arith(op, a, b)
        if isinstance(a, float):
            return {_key(dict(k)): _arith(op, a, x) for k, x in b.items()}
        if isinstance(b, float):
            return {_key(dict(k)): _arith(op, x, b) for k, x in a.items()}
        right = {}
        for k, x in b.items():
            kk = _key(dict(k))
            if kk in right:
                raise ParseError("many-to-many matching: the right side has several series with labels %s" %
                                 dict(kk))
            right[kk] = x
        out = {}
        for k, x in a.items():
            kk = _key(dict(k))
            if kk in right:
                if kk in out:
                    raise ParseError("many-to-one matching: the left side has several series with labels %s" %
                                     dict(kk))
                out[kk] = _arith(op, x, right[kk])
        return out


def _arith(op, a, b):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b if b else (math.nan if a == 0 else math.copysign(math.inf, a))
    if op == "%":
        return math.fmod(a, b) if b else math.nan
    raise Unsupported("operator %s" % op)


def _last_at(samples, t):
    """The last sample at or before t (samples are in time order)."""
    lo, hi = 0, len(samples)
    while lo < hi:
        mid = (lo + hi) // 2
        if samples[mid][0] <= t:
            lo = mid + 1
        else:
            hi = mid
    return samples[lo - 1] if lo else None


def _irate(window):
    if len(window) < 2:
        return None
    (t0, v0), (t1, v1) = window[-2], window[-1]
    if t1 == t0:
        return None
    return (v1 if v1 < v0 else v1 - v0) / (t1 - t0)


def _extrapolated(window, start, end, is_rate):
    """Prometheus' extrapolatedRate() for rate() and increase() of a counter."""
    if len(window) < 2:
        return None
    first_t, first_v = window[0]
    last_t, last_v = window[-1]
    delta = last_v - first_v
    prev = first_v
    for _, v in window[1:]:
        if v < prev:
            delta += prev
        prev = v
    sampled = last_t - first_t
    if sampled <= 0:
        return None
    to_start, to_end = first_t - start, end - last_t
    average = sampled / (len(window) - 1)
    if delta > 0 and first_v >= 0:
        to_zero = sampled * (first_v / delta)
        to_start = min(to_start, to_zero)
    threshold = average * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else average / 2
    interval += to_end if to_end < threshold else average / 2
    v = delta * (interval / sampled)
    return v / (end - start) if is_rate else v


def substitute(expr, variables):
    """expr with Grafana's $name, ${name} and [[name]] replaced; a variable not given is an error."""
    def one(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name not in variables:
            raise Unsupported("dashboard variable $%s" % name)
        return variables[name]
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]", one, expr)
