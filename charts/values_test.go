package charts

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
)

// schemaNode is the part of a JSON schema these tests read.
type schemaNode struct {
	Type                 any                    `json:"type"`
	Description          string                 `json:"description"`
	Properties           map[string]*schemaNode `json:"properties"`
	AdditionalProperties any                    `json:"additionalProperties"`
	Items                *schemaNode            `json:"items"`
	Enum                 []any                  `json:"enum"`
}

// closed reports whether the schema lists its keys: such an object's keys are the chart's own,
// each documented; other objects are Kubernetes types passed through (resources, affinity...).
func (s *schemaNode) closed() bool { return len(s.Properties) > 0 }

func loadSchema(t *testing.T) *schemaNode {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s schemaNode
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	return &s
}

func loadValuesNode(t *testing.T) *yaml.Node {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	if doc.Kind != yaml.DocumentNode || doc.Content[0].Kind != yaml.MappingNode {
		t.Fatal("values.yaml is not a mapping")
	}
	return doc.Content[0]
}

// TestValuesMatchSchema checks values.yaml against values.schema.json key by key, both ways:
// every value is in the schema (and, where the schema lists the keys, documented by a comment
// above it), every schema key has a default in values.yaml, and every schema key is described.
func TestValuesMatchSchema(t *testing.T) {
	schema := loadSchema(t)
	values := loadValuesNode(t)
	if schema.AdditionalProperties != false {
		t.Error("values.schema.json accepts unknown top-level keys")
	}
	var walk func(path string, v *yaml.Node, s *schemaNode)
	walk = func(path string, v *yaml.Node, s *schemaNode) {
		seen := map[string]bool{}
		for i := 0; i+1 < len(v.Content); i += 2 {
			key, val := v.Content[i], v.Content[i+1]
			p := strings.TrimPrefix(path+"."+key.Value, ".")
			seen[key.Value] = true
			sub, ok := s.Properties[key.Value]
			if !ok {
				t.Errorf("values.yaml %s is not in values.schema.json", p)
				continue
			}
			if strings.TrimSpace(key.HeadComment) == "" {
				t.Errorf("values.yaml %s has no comment above it", p)
			}
			if val.Kind == yaml.MappingNode && sub.closed() {
				walk(p, val, sub)
			}
		}
		for k := range s.Properties {
			// An object whose default is {} (config, certManager.issuerRef) is optional as a
			// whole; its keys are documented in values.yaml's comment and the schema.
			if !seen[k] && len(v.Content) > 0 {
				t.Errorf("values.schema.json %s has no default in values.yaml", strings.TrimPrefix(path+"."+k, "."))
			}
		}
	}
	walk("", values, schema)

	var describe func(path string, s *schemaNode)
	describe = func(path string, s *schemaNode) {
		for k, sub := range s.Properties {
			p := strings.TrimPrefix(path+"."+k, ".")
			if strings.TrimSpace(sub.Description) == "" {
				t.Errorf("values.schema.json %s has no description", p)
			}
			if sub.closed() && sub.AdditionalProperties != false {
				t.Errorf("values.schema.json %s lists its keys but accepts others", p)
			}
			describe(p, sub)
		}
	}
	describe("", schema)
}

// TestValuesDocumented checks that docs/configuration.md's table of chart values, which
// docs/install.md calls complete, has a row for every value of values.yaml (a row for an
// object covers its keys), and the upstream chart's aliases are in docs/migration.md.
func TestValuesDocumented(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(repoRoot, "docs", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	conf := read("configuration.md")
	_, table, ok := strings.Cut(conf, "\n## Helm chart values\n")
	if !ok {
		t.Fatal(`docs/configuration.md has no "## Helm chart values" section`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	documented := map[string]bool{}
	for line := range strings.Lines(table) {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		// "`a.b.c`, `.d`" names a.b.c and a.b.d.
		var last string
		for _, name := range backticked(cells[1]) {
			if strings.HasPrefix(name, ".") && last != "" {
				name = last[:strings.LastIndex(last, ".")] + name
			}
			documented[name], last = true, name
		}
	}
	migration := backticked(read("migration.md"))

	schema := loadSchema(t)
	var walk func(path string, v *yaml.Node, s *schemaNode, covered bool)
	walk = func(path string, v *yaml.Node, s *schemaNode, covered bool) {
		for i := 0; i+1 < len(v.Content); i += 2 {
			key, val := v.Content[i], v.Content[i+1]
			p := strings.TrimPrefix(path+"."+key.Value, ".")
			here := covered || documented[p]
			sub := s.Properties[key.Value]
			if val.Kind == yaml.MappingNode && sub != nil && sub.closed() && len(val.Content) > 0 {
				walk(p, val, sub, here)
				continue
			}
			if here {
				continue
			}
			if strings.Contains(key.HeadComment, "Upstream") && slices.Contains(migration, p) {
				continue
			}
			t.Errorf("values.yaml %s has no row in docs/configuration.md's chart values", p)
		}
	}
	walk("", loadValuesNode(t), schema, false)
}

// backticked returns the `code spans` of s.
func backticked(s string) []string {
	var out []string
	for {
		_, rest, ok := strings.Cut(s, "`")
		if !ok {
			return out
		}
		span, after, ok := strings.Cut(rest, "`")
		if !ok {
			return out
		}
		out, s = append(out, span), after
	}
}

// TestSchemaEnumsMatchCode checks the schema's lists of names against the code that reads them.
func TestSchemaEnumsMatchCode(t *testing.T) {
	schema := loadSchema(t)
	var controllers []string
	for _, e := range schema.Properties["controllers"].Items.Enum {
		controllers = append(controllers, e.(string))
	}
	want := append([]string{"*"}, app.AllControllers...)
	slices.Sort(controllers)
	slices.Sort(want)
	if !slices.Equal(controllers, want) {
		t.Errorf("controllers enum %v, want %v (cmd/app AllControllers and *)", controllers, want)
	}
	var policies []string
	for _, e := range schema.Properties["webhook"].Properties["failurePolicy"].Enum {
		policies = append(policies, e.(string))
	}
	if !slices.Equal(policies, []string{"Ignore", "Fail"}) {
		t.Errorf("failurePolicy enum %v", policies)
	}
}

// TestCIValuesExercisedKeys checks that the ci values files are valid against the schema's
// key sets (helm lint validates types; this catches a ci file drifting from the chart).
func TestCIValuesExercisedKeys(t *testing.T) {
	schema := loadSchema(t)
	for _, f := range ciValuesFiles(t) {
		b, err := os.ReadFile(filepath.Join(chartDir, f))
		if err != nil {
			t.Fatal(err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !strings.HasPrefix(string(b), "# ") {
			t.Errorf("%s does not say what it tests in a leading comment", f)
		}
		var walk func(path string, v *yaml.Node, s *schemaNode)
		walk = func(path string, v *yaml.Node, s *schemaNode) {
			for i := 0; i+1 < len(v.Content); i += 2 {
				key, val := v.Content[i].Value, v.Content[i+1]
				sub, ok := s.Properties[key]
				if !ok {
					t.Errorf("%s: %s%s is not a chart value", f, path, key)
					continue
				}
				if val.Kind == yaml.MappingNode && sub.closed() {
					walk(path+key+".", val, sub)
				}
			}
		}
		walk("", doc.Content[0], schema)
	}
}

// helperList returns the names a define block of _validate.tpl lists, one per line as "- name"
// or "name: ...".
func helperList(t *testing.T, define string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "templates", "_validate.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(b), `{{- define "`+define+`" -}}`)
	if !ok {
		t.Fatalf("_validate.tpl has no define %q", define)
	}
	body, _, _ = strings.Cut(body, "{{- end -}}")
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "- "), ":")
		out = append(out, strings.TrimSpace(name))
	}
	return out
}

// TestExtraArgsMatchBinaryFlags passes each of the binary's flags through extraArgs: a flag the
// chart sets must be refused (the binary would silently keep the last of the two), --check-config
// too (the pod would exit at once), any other must reach the binary (binary-flags.yaml, generated
// from the binary's flags, lets them through). The chart's lists of chart-set and upstream flags
// are checked against the binary's flags the other way.
func TestExtraArgsMatchBinaryFlags(t *testing.T) {
	o := app.NewOptions()
	fs := flag.NewFlagSet(chartName, flag.ContinueOnError)
	o.AddFlags(fs)
	// controller-runtime registers --kubeconfig on the command line of every binary using it.
	isFlag := func(name string) bool {
		return fs.Lookup(name) != nil || (name == "kubeconfig" && flag.Lookup(name) != nil)
	}

	// Every value that adds a flag, so that every chart-set flag shows: the certificate flags
	// differ by webhook.certificates.mode, the metrics flags by metrics.insecureHTTP.
	_, c := deployment(t, render(t, "ci/config-values.yaml"))
	_, selfManaged := deployment(t, render(t, "ci/config-values.yaml", "webhook.certificates.mode=selfManaged"))
	_, insecure := deployment(t, render(t, "ci/config-values.yaml", "metrics.insecureHTTP=true"))
	fs.VisitAll(func(f *flag.Flag) {
		t.Run(f.Name, func(t *testing.T) {
			arg := "--" + f.Name + "=" + f.DefValue
			values := filepath.Join(t.TempDir(), "values.yaml")
			b, err := yaml.Marshal(map[string][]string{"extraArgs": {arg}})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(values, b, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := runHelm(t, append(templateArgs(namespace, "ci/config-values.yaml"), "-f", values)...)
			_, chartSet := flagValue(t, c.Args, f.Name)
			for _, other := range []*corev1.Container{selfManaged, insecure} {
				if _, ok := flagValue(t, other.Args, f.Name); ok {
					chartSet = true
				}
			}
			switch {
			case chartSet:
				if err == nil || !strings.Contains(err.Error(), "is set by the chart") {
					t.Errorf("%s, set by the chart, is not refused in extraArgs: %v", arg, err)
				}
			case f.Name == "check-config":
				if err == nil || !strings.Contains(err.Error(), "exit at once") {
					t.Errorf("%s is not refused in extraArgs: %v", arg, err)
				}
			default:
				if err != nil {
					t.Fatalf("%s refused in extraArgs: %v", arg, err)
				}
				o, err := parseManifests([]byte(out))
				if err != nil {
					t.Fatal(err)
				}
				_, c := deployment(t, o)
				if !slices.Contains(c.Args, arg) {
					t.Errorf("%s not passed: %q", arg, c.Args)
				}
			}
		})
	})

	for _, name := range helperList(t, "xoccm.chartFlags") {
		if !isFlag(name) {
			t.Errorf("xoccm.chartFlags lists %s, which is not a flag of the binary", name)
		}
	}
	for _, name := range helperList(t, "xoccm.upstreamFlags") {
		if isFlag(name) {
			t.Errorf("xoccm.upstreamFlags refuses %s, which is a flag of the binary", name)
		}
	}
}

// TestLookupTimeoutSchema checks webhook.lookupTimeout's schema against the binary's bound,
// (0, 10s]: every value the schema accepts, the binary accepts; values outside the bound are
// refused at render. The schema is stricter in form only (one number, one unit). timeoutSeconds
// is at its maximum, 30, above every lookupTimeout, so that the chart's lookupTimeout <
// timeoutSeconds guard (TestRenderRejects) refuses none of them.
func TestLookupTimeoutSchema(t *testing.T) {
	cases := map[string]bool{
		"1s": true, "10s": true, "10.0s": true, "9.999s": true, "0.5s": true, "500ms": true, "10000ms": true,
		"1500.5ms": true, "100us": true, "100µs": true, "10000000us": true, "1ns": true, "10000000000ns": true,
		"0s": false, "0.0s": false, "0ms": false, "10.5s": false, "11s": false, "10001ms": false, "10000001us": false,
		"10000000001ns": false, "1m": false, "1h": false, "-1s": false, "1": false, "": false, "1 s": false,
		"1s500ms": false, // valid and in bounds, but refused: the schema takes one unit
	}
	for value, accepted := range cases {
		t.Run(value, func(t *testing.T) {
			out, err := runHelm(t, templateArgs(namespace, "", "webhook.timeoutSeconds=30", "webhook.lookupTimeout="+value)...)
			if (err == nil) != accepted {
				t.Fatalf("rendered %v, want %v: %v", err == nil, accepted, err)
			}
			if !accepted {
				if !strings.Contains(err.Error(), "lookupTimeout") {
					t.Errorf("error does not name lookupTimeout: %v", err)
				}
				return
			}
			o, err := parseManifests([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			_, c := deployment(t, o)
			if got := mustFlag(t, c.Args, "webhook-lookup-timeout"); got != value {
				t.Errorf("--webhook-lookup-timeout=%s, want %s", got, value)
			}
			if err := binaryFlags(c.Args); err != nil {
				t.Errorf("the binary refuses %s: %v", value, err)
			}
		})
	}
}
