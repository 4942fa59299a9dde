// SPDX-License-Identifier: Apache-2.0

// Tests of the Helm behaviours chart-render reproduces; run by
// tests/chart/test-chart.sh (go test, offline, GOPATH mode).
package main

import (
	"strings"
	"testing"
	"text/template"
)

func mustMap(t *testing.T, s string) map[string]interface{} {
	t.Helper()
	m, err := readYAMLMap([]byte(s), "test")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestValuesAreJSONTyped(t *testing.T) {
	// Helm reads values through JSON: numbers are float64, keys strings.
	m := mustMap(t, "a: 2\nb: {c: [1, x]}\n")
	if _, ok := m["a"].(float64); !ok {
		t.Fatalf("a is %T, want float64", m["a"])
	}
	if _, ok := m["b"].(map[string]interface{}); !ok {
		t.Fatalf("b is %T, want map[string]interface{}", m["b"])
	}
}

func TestCoalesce(t *testing.T) {
	dst := mustMap(t, "keep: 1\nmap: {a: 1, b: 2}\nlist: [1, 2]\ngone: x\n")
	src := mustMap(t, "map: {b: 3, c: 4}\nlist: [9]\ngone: null\nnew: z\n")
	got := toYAML(coalesce(dst, src))
	want := "keep: 1\nlist:\n- 9\nmap:\n  a: 1\n  b: 3\n  c: 4\nnew: z"
	if got != want {
		t.Fatalf("coalesce:\n%s\nwant:\n%s", got, want)
	}
}

func TestSetValue(t *testing.T) {
	m := mustMap(t, "a: {b: 1}\n")
	for _, s := range []string{"a.c=true", "a.b=2", "x.w.z=str", "a.b=null"} {
		if err := setValue(m, s); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := toYAML(m), "a:\n  c: true\nx:\n  w:\n    z: str"; got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if err := setValue(m, "novalue"); err == nil {
		t.Fatal("--set without = accepted")
	}
}

func TestToYAMLNumbersAndQuoting(t *testing.T) {
	// Through JSON as Helm does: 1000000 stays an integer (yaml.v2 alone
	// would print 1e+06), strings that look like numbers or booleans stay
	// quoted, and so do YAML 1.1 boolean words used as keys ("y", "n").
	m := map[string]interface{}{"num": float64(1000000), "v": "1.10", "b": "true", "y": 1}
	if got, want := toYAML(m), "b: \"true\"\nnum: 1000000\nv: \"1.10\"\n\"y\": 1"; got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

func render(t *testing.T, defs, text string, data interface{}) (string, error) {
	t.Helper()
	r := &renderer{chartName: "t"}
	r.tmpl = template.New("gotpl").Option("missingkey=zero")
	r.tmpl.Funcs(r.funcMap())
	if _, err := r.tmpl.New("defs").Parse(defs); err != nil {
		t.Fatal(err)
	}
	tm, err := r.tmpl.New("main").Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	err = tm.Execute(&sb, data)
	return strings.ReplaceAll(sb.String(), "<no value>", ""), err
}

func TestHelmFunctions(t *testing.T) {
	data := map[string]interface{}{"Values": map[string]interface{}{"name": "x", "empty": ""}}
	got, err := render(t, `{{ define "greet" }}hello {{ .Values.name }}{{ end }}`,
		`{{ include "greet" . | upper }}|{{ tpl "{{ .Values.name }}-tpl" . }}|{{ .Values.missing }}|`+
			`{{ fromYaml "a: 1" | toJson }}|{{ toYaml (dict "k" (list 1 2)) | nindent 2 }}`, data)
	if err != nil {
		t.Fatal(err)
	}
	if want := "HELLO X|x-tpl||{\"a\":1}|\n  k:\n  - 1\n  - 2"; got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if _, err := render(t, "", `{{ required "name it" .Values.empty }}`, data); err == nil ||
		!strings.Contains(err.Error(), "name it") {
		t.Fatalf("required on an empty string: %v", err)
	}
	if _, err := render(t, "", `{{ fail "stop here" }}`, data); err == nil || !strings.Contains(err.Error(), "stop here") {
		t.Fatalf("fail: %v", err)
	}
	r := &renderer{}
	for _, f := range []string{"env", "expandenv"} {
		if _, ok := r.funcMap()[f]; ok {
			t.Fatalf("%s is available; Helm removes it", f)
		}
	}
}

func TestRecursiveIncludeIsBounded(t *testing.T) {
	_, err := render(t, `{{ define "loop" }}{{ include "loop" . }}{{ end }}`, `{{ include "loop" . }}`, nil)
	if err == nil || !strings.Contains(err.Error(), "nested reference") {
		t.Fatalf("runaway include: %v", err)
	}
}

func TestSplitDocuments(t *testing.T) {
	docs := splitDocuments("a: 1\n---\nb: 2\n--- \n\n")
	if len(docs) != 3 || strings.TrimSpace(docs[0]) != "a: 1" || strings.TrimSpace(docs[1]) != "b: 2" {
		t.Fatalf("split: %q", docs)
	}
}

func TestLookup(t *testing.T) {
	r := &renderer{cluster: []map[string]interface{}{
		mustMap(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: a, namespace: ns}\ndata: {k: dg==}\n"),
		mustMap(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: b, namespace: other}\n"),
	}}
	o, _ := r.lookup("v1", "Secret", "ns", "a")
	if d, _ := o["data"].(map[string]interface{}); d["k"] != "dg==" {
		t.Fatalf("lookup of an existing object: %v", o)
	}
	if o, _ := r.lookup("v1", "Secret", "ns", "b"); len(o) != 0 {
		t.Fatalf("lookup in the wrong namespace found %v", o)
	}
	if o, _ := r.lookup("v1", "ConfigMap", "ns", "a"); len(o) != 0 {
		t.Fatalf("lookup of the wrong kind found %v", o)
	}
	l, _ := r.lookup("v1", "Secret", "", "")
	if items, _ := l["items"].([]interface{}); len(items) != 2 {
		t.Fatalf("list in every namespace: %v", l)
	}
}
