package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestGenerated checks that the chart holds what make generate writes: values.schema.json's
// config part generated from package config, the rest unchanged, and the binary's flags.
func TestGenerated(t *testing.T) {
	const root = "../.."
	doc, err := os.ReadFile(filepath.Join(root, SchemaFile))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Generate(root, doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, doc) {
		t.Errorf("%s is not what package config generates: run make generate", SchemaFile)
	}
	if !json.Valid(got) {
		t.Errorf("the generated schema is not JSON")
	}
	flags, err := os.ReadFile(filepath.Join(root, FlagsFile))
	if err != nil || !bytes.Equal(flags, Flags()) {
		t.Errorf("%s is not the binary's flags (%v): run make generate", FlagsFile, err)
	}
}

// TestGenerateKeepsTheRest checks that only properties.config is replaced, wherever it is in
// the document.
func TestGenerateKeepsTheRest(t *testing.T) {
	doc := []byte(`{"a": {"properties": {"config": 1}}, "properties": {"b": [{"config": 2}], "config": {"x": "y"}, "c": true}}` + "\n")
	got, err := Generate("../..", doc)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		A          map[string]map[string]int `json:"a"`
		Properties map[string]json.RawMessage
	}
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("%v:\n%s", err, got)
	}
	if v.A["properties"]["config"] != 1 || string(v.Properties["b"]) != `[{"config": 2}]` || string(v.Properties["c"]) != "true" ||
		!bytes.Contains(v.Properties["config"], []byte(`"clusters"`)) || !bytes.HasSuffix(got, []byte("true}}\n")) {
		t.Errorf("Generate =\n%s", got)
	}
}
