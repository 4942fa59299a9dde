// SPDX-License-Identifier: Apache-2.0

// chart-render renders a Helm chart the way `helm template` does, without
// Helm: Go's text/template with the sprig function library (the engine Helm
// itself is built on), plus Helm's own functions (include, tpl, toYaml,
// fromYaml, fromYamlArray, toJson, fromJson, fromJsonArray, required, fail,
// lookup), its built-in objects
// (.Values, .Release, .Chart, .Capabilities, .Template, .Files) and its value
// handling (chart defaults coalesced with -f files and --set, null deletes a
// key, values.schema.json checked with the JSON-schema library Helm uses).
//
// Helm is not packaged for Debian 12, and CI has no network, so this lets the
// chart be rendered, diffed against golden manifests and schema-validated in
// CI. It implements what charts/stackrelay uses and what a chart commonly
// uses; it is not a Helm replacement (no subcharts, hooks are rendered like
// any manifest). lookup returns an empty map as `helm template` does, or,
// with --lookup, the objects of a file standing for what the cluster already
// holds, as `helm upgrade` sees them.
//
//	chart-render [-f values.yaml]... [--set key=value]... [--name NAME]
//	             [--namespace NS] [--kube-version 1.30.0]
//	             [--api-versions group/version]... [--lookup objects.yaml]
//	             [--notes] CHART_DIR
//
// Exit status: 0 rendered, 1 a chart or values error (message on stderr),
// 2 bad usage.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"github.com/xeipuuv/gojsonschema"
	yaml "gopkg.in/yaml.v2"
)

// Same bound as Helm's engine: a runaway recursive include fails instead of
// exhausting the stack.
const maxIncludeDepth = 1000

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// Helm's built-in objects. Field names are what templates use.
type release struct {
	Name      string
	Namespace string
	Revision  int
	IsInstall bool
	IsUpgrade bool
	Service   string
}

type kubeVersion struct {
	Version    string
	Major      string
	Minor      string
	GitVersion string
}

func (k kubeVersion) String() string { return k.Version }

type apiVersions []string

// Has reports whether group/version (or group/version/Kind) is available, as
// .Capabilities.APIVersions.Has does in Helm.
func (a apiVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

type capabilities struct {
	KubeVersion kubeVersion
	APIVersions apiVersions
	HelmVersion map[string]string
}

type templateInfo struct {
	Name     string
	BasePath string
}

// files gives templates the chart's non-template files (.Files.Get).
type files map[string][]byte

func (f files) Get(name string) string { return string(f[name]) }
func (f files) GetBytes(name string) []byte {
	return f[name]
}
func (f files) Lines(name string) []string {
	s := string(f[name])
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

type chartMeta map[string]interface{}

type renderer struct {
	chartName string
	tmpl      *template.Template
	top       map[string]interface{}
	// What lookup finds: the objects of --lookup (none without it).
	cluster []map[string]interface{}
}

// lookup behaves as Helm's: the object with that apiVersion, kind,
// namespace and name, an empty map when there is none, and with an empty
// name a list ({items: [...]}) of every object of that kind in namespace.
func (r *renderer) lookup(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
	var items []interface{}
	for _, o := range r.cluster {
		meta, _ := o["metadata"].(map[string]interface{})
		if o["apiVersion"] != apiVersion || o["kind"] != kind || meta == nil {
			continue
		}
		if ns, _ := meta["namespace"].(string); namespace != "" && ns != namespace {
			continue
		}
		if name == "" {
			items = append(items, o)
		} else if meta["name"] == name {
			return o, nil
		}
	}
	if name == "" {
		if items == nil {
			items = []interface{}{}
		}
		return map[string]interface{}{"apiVersion": "v1", "kind": kind + "List", "items": items}, nil
	}
	return map[string]interface{}{}, nil
}

// loadCluster reads --lookup: multi-document YAML, one object per document.
func loadCluster(file string) ([]map[string]interface{}, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var objs []map[string]interface{}
	for i, doc := range splitDocuments(string(b)) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		o, err := readYAMLMap([]byte(doc), fmt.Sprintf("%s: document %d", file, i+1))
		if err != nil {
			return nil, err
		}
		if len(o) > 0 {
			objs = append(objs, o)
		}
	}
	return objs, nil
}

func fatalf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "Error: "+format+"\n", args...)
	os.Exit(1)
}

// toJSONCompatible turns what yaml.v2 produces (map[interface{}]interface{},
// ints) into what Helm's sigs.k8s.io/yaml produces: map[string]interface{}
// and float64 numbers, by a JSON round trip. Templates then behave as under
// Helm, e.g. `{{ .Values.n }}` of 2 prints "2" and `int` is needed for ints.
func toJSONCompatible(v interface{}) (interface{}, error) {
	conv, err := stringKeys(v)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(conv)
	if err != nil {
		return nil, err
	}
	var out interface{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func stringKeys(v interface{}) (interface{}, error) {
	switch t := v.(type) {
	case map[interface{}]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, val := range t {
			c, err := stringKeys(val)
			if err != nil {
				return nil, err
			}
			m[fmt.Sprint(k)] = c
		}
		return m, nil
	case []interface{}:
		l := make([]interface{}, len(t))
		for i, val := range t {
			c, err := stringKeys(val)
			if err != nil {
				return nil, err
			}
			l[i] = c
		}
		return l, nil
	default:
		return v, nil
	}
}

func readYAMLMap(data []byte, what string) (map[string]interface{}, error) {
	var raw interface{}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	if raw == nil {
		return map[string]interface{}{}, nil
	}
	v, err := toJSONCompatible(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("%s: top level is not a mapping", what)
	}
	return m, nil
}

// coalesce merges src over dst as Helm does for user values over chart
// defaults: mappings merge key by key, anything else replaces, and a null in
// src deletes the key.
func coalesce(dst, src map[string]interface{}) map[string]interface{} {
	for k, sv := range src {
		if sv == nil {
			delete(dst, k)
			continue
		}
		sm, sIsMap := sv.(map[string]interface{})
		dm, dIsMap := dst[k].(map[string]interface{})
		if sIsMap && dIsMap {
			dst[k] = coalesce(dm, sm)
		} else {
			dst[k] = sv
		}
	}
	return dst
}

// setValue applies one --set a.b.c=value (values parsed as YAML scalars,
// like Helm's strvals for plain values; no list index syntax).
func setValue(vals map[string]interface{}, expr string) error {
	eq := strings.IndexByte(expr, '=')
	if eq <= 0 {
		return fmt.Errorf("--set %q: expected key=value", expr)
	}
	keys := strings.Split(expr[:eq], ".")
	var v interface{}
	if err := yaml.Unmarshal([]byte(expr[eq+1:]), &v); err != nil {
		v = expr[eq+1:]
	}
	v, err := toJSONCompatible(v)
	if err != nil {
		return err
	}
	m := vals
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			m[k] = next
		}
		m = next
	}
	if v == nil {
		delete(m, keys[len(keys)-1])
	} else {
		m[keys[len(keys)-1]] = v
	}
	return nil
}

// toYAML is Helm's toYaml: JSON encoding rules (so numbers print as numbers,
// not 1e+06) then YAML, keys sorted.
func toYAML(v interface{}) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var y interface{}
	if err := yaml.Unmarshal(b, &y); err != nil {
		return ""
	}
	out, err := yaml.Marshal(y)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(out), "\n")
}

func fromYAML(s string) map[string]interface{} {
	m, err := readYAMLMap([]byte(s), "fromYaml")
	if err != nil {
		return map[string]interface{}{"Error": err.Error()}
	}
	return m
}

func fromYAMLArray(s string) []interface{} {
	var raw interface{}
	if err := yaml.Unmarshal([]byte(s), &raw); err != nil {
		return []interface{}{err.Error()}
	}
	v, err := toJSONCompatible(raw)
	if err != nil {
		return []interface{}{err.Error()}
	}
	l, _ := v.([]interface{})
	return l
}

func toJSON(v interface{}) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

func fromJSONArray(s string) []interface{} {
	var l []interface{}
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return []interface{}{err.Error()}
	}
	return l
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func (r *renderer) funcMap() template.FuncMap {
	f := sprig.TxtFuncMap()
	// Helm removes these: a chart must render the same everywhere.
	delete(f, "env")
	delete(f, "expandenv")
	includeDepth := map[string]int{}
	f["toYaml"] = toYAML
	f["fromYaml"] = fromYAML
	f["fromYamlArray"] = fromYAMLArray
	f["toJson"] = toJSON
	f["fromJson"] = fromJSON
	f["fromJsonArray"] = fromJSONArray
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	f["fail"] = func(msg string) (string, error) { return "", errors.New(msg) }
	f["lookup"] = r.lookup
	f["include"] = func(name string, data interface{}) (string, error) {
		if includeDepth[name] >= maxIncludeDepth {
			return "", fmt.Errorf("rendering template has a nested reference name: %s", name)
		}
		includeDepth[name]++
		defer func() { includeDepth[name]-- }()
		var buf bytes.Buffer
		if err := r.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := r.tmpl.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Option("missingkey=zero").Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %v", text, err)
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", fmt.Errorf("error calling tpl: %v", err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	return f
}

// Helm's install order (pkg/releaseutil/kind_sorter.go): `helm template`
// prints manifests sorted by it; other kinds go last.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
	"PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
	"PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
	"ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList",
	"RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController",
	"ReplicaSet", "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob",
	"IngressClass", "Ingress", "APIService",
}

type manifest struct {
	source string
	kind   string
	body   string
}

func kindRank(kind string) int {
	for i, k := range installOrder {
		if k == kind {
			return i
		}
	}
	return len(installOrder)
}

func splitDocuments(s string) []string {
	var docs []string
	var cur []string
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimRight(line, " \t") == "---" {
			docs = append(docs, strings.Join(cur, "\n"))
			cur = nil
			continue
		}
		cur = append(cur, line)
	}
	return append(docs, strings.Join(cur, "\n"))
}

func loadChart(dir string) (map[string]interface{}, map[string]interface{}, files, []string, error) {
	chartYAML, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	meta, err := readYAMLMap(chartYAML, "Chart.yaml")
	if err != nil {
		return nil, nil, nil, nil, err
	}
	// .Chart fields are capitalized (Name, Version, AppVersion, ...).
	chart := map[string]interface{}{}
	for k, v := range meta {
		chart[strings.ToUpper(k[:1])+k[1:]] = v
	}
	if chart["Name"] == nil || chart["Version"] == nil {
		return nil, nil, nil, nil, errors.New("Chart.yaml: name and version are required")
	}
	var defaults map[string]interface{}
	if b, err := os.ReadFile(filepath.Join(dir, "values.yaml")); err == nil {
		if defaults, err = readYAMLMap(b, "values.yaml"); err != nil {
			return nil, nil, nil, nil, err
		}
	} else {
		defaults = map[string]interface{}{}
	}
	all := files{}
	var tmpls []string
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if info.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasPrefix(rel, "templates/") {
			tmpls = append(tmpls, rel)
		} else {
			all[rel] = b
		}
		return nil
	})
	sort.Strings(tmpls)
	return chart, defaults, all, tmpls, err
}

func validateSchema(dir string, vals map[string]interface{}, chartName string) error {
	schema, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	res, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema), gojsonschema.NewGoLoader(vals))
	if err != nil {
		return fmt.Errorf("values.schema.json: %v", err)
	}
	if res.Valid() {
		return nil
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n", chartName)
	for _, e := range res.Errors() {
		fmt.Fprintf(&sb, "- %s\n", e)
	}
	return errors.New(strings.TrimSuffix(sb.String(), "\n"))
}

func main() {
	var valueFiles, sets, apis multiFlag
	name := flag.String("name", "stackrelay", "release name (.Release.Name)")
	namespace := flag.String("namespace", "default", "release namespace (.Release.Namespace)")
	kubeVer := flag.String("kube-version", "1.30.0", "Kubernetes version for .Capabilities.KubeVersion")
	notes := flag.Bool("notes", false, "print the rendered NOTES.txt after the manifests")
	lookupFile := flag.String("lookup", "", "multi-document YAML of the objects lookup finds (as on an upgrade)")
	flag.Var(&valueFiles, "f", "values file merged over the chart's values.yaml (repeatable, later wins)")
	flag.Var(&sets, "set", "key.path=value merged last (repeatable)")
	flag.Var(&apis, "api-versions", "extra API version for .Capabilities.APIVersions (repeatable)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: chart-render [flags] CHART_DIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	dir := flag.Arg(0)

	chart, vals, chartFiles, tmplFiles, err := loadChart(dir)
	if err != nil {
		fatalf("loading chart %s: %v", dir, err)
	}
	chartName := fmt.Sprint(chart["Name"])
	for _, vf := range valueFiles {
		b, err := os.ReadFile(vf)
		if err != nil {
			fatalf("%v", err)
		}
		over, err := readYAMLMap(b, vf)
		if err != nil {
			fatalf("%v", err)
		}
		vals = coalesce(vals, over)
	}
	for _, s := range sets {
		if err := setValue(vals, s); err != nil {
			fatalf("%v", err)
		}
	}
	if err := validateSchema(dir, vals, chartName); err != nil {
		fatalf("%v", err)
	}

	kv := strings.TrimPrefix(*kubeVer, "v")
	parts := strings.SplitN(kv, ".", 3)
	if len(parts) < 2 {
		fatalf("--kube-version %q: expected MAJOR.MINOR[.PATCH]", *kubeVer)
	}
	if _, err := strconv.Atoi(parts[1]); err != nil {
		fatalf("--kube-version %q: expected MAJOR.MINOR[.PATCH]", *kubeVer)
	}
	// The API groups every supported Kubernetes serves, plus --api-versions
	// (e.g. monitoring.coreos.com/v1 when the Prometheus operator is there).
	baseAPIs := apiVersions{"v1", "apps/v1", "batch/v1", "policy/v1", "autoscaling/v2", "autoscaling/v1",
		"rbac.authorization.k8s.io/v1", "scheduling.k8s.io/v1", "networking.k8s.io/v1", "storage.k8s.io/v1"}
	caps := capabilities{
		KubeVersion: kubeVersion{Version: "v" + kv, Major: parts[0], Minor: parts[1], GitVersion: "v" + kv},
		APIVersions: append(baseAPIs, apis...),
		HelmVersion: map[string]string{"Version": "v3.14.0"},
	}
	rel := release{Name: *name, Namespace: *namespace, Revision: 1, IsInstall: true, Service: "Helm"}

	r := &renderer{chartName: chartName}
	if *lookupFile != "" {
		if r.cluster, err = loadCluster(*lookupFile); err != nil {
			fatalf("--lookup: %v", err)
		}
		rel.Revision, rel.IsInstall, rel.IsUpgrade = 2, false, true
	}
	r.tmpl = template.New("gotpl").Option("missingkey=zero")
	r.tmpl.Funcs(r.funcMap())
	for _, tf := range tmplFiles {
		b, err := os.ReadFile(filepath.Join(dir, tf))
		if err != nil {
			fatalf("%v", err)
		}
		full := path.Join(chartName, tf)
		if _, err := r.tmpl.New(full).Parse(string(b)); err != nil {
			fatalf("parse error in %s: %v", full, err)
		}
	}

	var out []manifest
	var notesText string
	for _, tf := range tmplFiles {
		base := path.Base(tf)
		if strings.HasPrefix(base, "_") {
			continue
		}
		full := path.Join(chartName, tf)
		top := map[string]interface{}{
			"Values":       vals,
			"Release":      rel,
			"Chart":        chart,
			"Capabilities": caps,
			"Files":        chartFiles,
			"Template":     templateInfo{Name: full, BasePath: path.Join(chartName, "templates")},
		}
		var buf bytes.Buffer
		if err := r.tmpl.ExecuteTemplate(&buf, full, top); err != nil {
			fatalf("%v", err)
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if base == "NOTES.txt" {
			notesText = text
			continue
		}
		if !strings.HasSuffix(base, ".yaml") && !strings.HasSuffix(base, ".yml") && !strings.HasSuffix(base, ".tpl") {
			continue
		}
		for _, doc := range splitDocuments(text) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var obj map[string]interface{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				fatalf("YAML parse error on %s: %v\n%s", full, err, doc)
			}
			if len(obj) == 0 {
				continue // only comments
			}
			kind, _ := obj["kind"].(string)
			if kind == "" || obj["apiVersion"] == nil {
				fatalf("%s: a manifest without apiVersion or kind:\n%s", full, doc)
			}
			out = append(out, manifest{source: full, kind: kind, body: strings.Trim(doc, "\n")})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return kindRank(out[i].kind) < kindRank(out[j].kind) })
	for _, m := range out {
		fmt.Printf("---\n# Source: %s\n%s\n", m.source, m.body)
	}
	if *notes && notesText != "" {
		fmt.Printf("\nNOTES:\n%s", notesText)
	}
}
