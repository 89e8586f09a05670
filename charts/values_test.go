package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/config"
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

// TestConfigSchemaMatchesConfigPackage checks that the schema of .Values.config has exactly the
// keys the binary's config file has, at every level.
func TestConfigSchemaMatchesConfigPackage(t *testing.T) {
	got := map[string]bool{}
	var walk func(prefix string, s *schemaNode)
	walk = func(prefix string, s *schemaNode) {
		for k, sub := range s.Properties {
			got[prefix+k] = true
			walk(prefix+k+".", sub)
		}
	}
	walk("", loadSchema(t).Properties["config"])

	want := map[string]bool{}
	var fields func(prefix string, typ reflect.Type)
	fields = func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			want[prefix+name] = true
			if f.Type.Kind() == reflect.Struct {
				fields(prefix+name+".", f.Type)
			}
		}
	}
	fields("", reflect.TypeFor[config.Config]())

	for k := range want {
		if !got[k] {
			t.Errorf("config key %s is missing from values.schema.json config", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("values.schema.json config.%s is not a config key", k)
		}
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
