package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/yaml"
)

const testToken = "s3cr3t-TOKEN-value-9f8e7d6c5b4a"

func TestSecretFormats(t *testing.T) {
	s := Secret(testToken)
	tests := []struct {
		format string
		want   string
	}{
		{"%v", "<redacted>"},
		{"%+v", "<redacted>"},
		{"%#v", `"<redacted>"`},
		{"%s", "<redacted>"},
		{"%q", `"<redacted>"`},
		{"%12s", "  <redacted>"},
		{"%-12v|", "<redacted>  |"},
		{"%x", fmt.Sprintf("%x", "<redacted>")},
		{"%X", fmt.Sprintf("%X", "<redacted>")},
		{"%d", "%!d(string=<redacted>)"},
		{"%.3s", "<re"},
	}
	for _, tt := range tests {
		got := fmt.Sprintf(tt.format, s)
		if got != tt.want {
			t.Errorf("Sprintf(%q) = %q, want %q", tt.format, got, tt.want)
		}
		if strings.Contains(got, testToken) {
			t.Errorf("Sprintf(%q) leaks the token", tt.format)
		}
	}
	if got := s.String(); got != Redacted {
		t.Errorf("String() = %q", got)
	}
	if got := s.GoString(); got != `"<redacted>"` {
		t.Errorf("GoString() = %q", got)
	}
	if got := s.Reveal(); got != testToken {
		t.Errorf("Reveal() = %q, want the value", got)
	}
	if got := fmt.Sprint(s) + fmt.Sprintln(s); strings.Contains(got, testToken) {
		t.Errorf("Sprint leaks: %q", got)
	}
}

func TestSecretEmpty(t *testing.T) {
	var s Secret
	for format, want := range map[string]string{"%v": "", "%s": "", "%q": `""`, "%#v": `""`} {
		if got := fmt.Sprintf(format, s); got != want {
			t.Errorf("Sprintf(%q, empty) = %q, want %q", format, got, want)
		}
	}
	if b, _ := json.Marshal(s); string(b) != `""` {
		t.Errorf("json = %s", b)
	}
}

func TestSecretMarshal(t *testing.T) {
	s := Secret(testToken)
	b, err := s.MarshalJSON()
	if err != nil || string(b) != `"<redacted>"` {
		t.Errorf("MarshalJSON = %s, %v", b, err)
	}
	// json.Marshal escapes < and > as \u003c and \u003e; decoded, it is the same text.
	var back string
	if b, err := json.Marshal(s); err != nil || json.Unmarshal(b, &back) != nil || back != Redacted {
		t.Errorf("json.Marshal = %s (%q), %v", b, back, err)
	}
	txt, err := s.MarshalText()
	if err != nil || string(txt) != Redacted {
		t.Errorf("MarshalText = %s, %v", txt, err)
	}
	y, err := s.MarshalYAML()
	if err != nil || y != Redacted {
		t.Errorf("MarshalYAML = %v, %v", y, err)
	}
	var enc bytes.Buffer
	e := json.NewEncoder(&enc)
	e.SetEscapeHTML(false)
	if err := e.Encode(map[string]Secret{"k": s}); err != nil || enc.String() != `{"k":"<redacted>"}`+"\n" {
		t.Errorf("Encode(map) = %s, %v", enc.String(), err)
	}
}

func TestSecretSlog(t *testing.T) {
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		cfg := validConfig()
		slog.New(h(&buf)).Info("loaded", "token", cfg.Clusters[0].Token, "config", cfg)
		if strings.Contains(buf.String(), testToken) {
			t.Errorf("%s handler leaks the token: %s", name, buf.String())
		}
		if !strings.Contains(buf.String(), Redacted) {
			t.Errorf("%s handler: no %s in %s", name, Redacted, buf.String())
		}
	}
}

// validConfig is a valid Config holding testToken.
func validConfig() *Config {
	c := Default()
	c.Clusters = []Cluster{server()}
	return c
}

func TestConfigNeverPrintsToken(t *testing.T) {
	cfg := validConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	outputs := map[string]string{
		"%v":   fmt.Sprintf("%v", cfg),
		"%+v":  fmt.Sprintf("%+v", cfg),
		"%#v":  fmt.Sprintf("%#v", cfg),
		"*%v":  fmt.Sprintf("%v", *cfg),
		"*%#v": fmt.Sprintf("%#v", *cfg),
		"err":  fmt.Errorf("wrapped: %v", cfg).Error(),
	}
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	outputs["json"] = string(j)
	y, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatalf("yaml.Marshal: %v", err)
	}
	outputs["yaml"] = string(y)
	for name, out := range outputs {
		if strings.Contains(out, testToken) {
			t.Errorf("%s leaks the token: %s", name, out)
		}
		out = strings.NewReplacer(`\u003c`, "<", `\u003e`, ">").Replace(out)
		if !strings.Contains(out, Redacted) {
			t.Errorf("%s: want %s in %s", name, Redacted, out)
		}
	}
}

func TestConfigJSON(t *testing.T) {
	cfg := validConfig()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	clusters, _ := got["clusters"].([]any)
	if len(clusters) != 1 {
		t.Fatalf("clusters = %v", got["clusters"])
	}
	cl, _ := clusters[0].(map[string]any)
	if cl["requestTimeout"] != "10s" || cl["listTimeout"] != "2m0s" {
		t.Errorf("timeouts = %v / %v, want 10s / 2m0s", cl["requestTimeout"], cl["listTimeout"])
	}
	inv, _ := got["inventory"].(map[string]any)
	if inv["resyncPeriod"] != "10m0s" || inv["pollPeriod"] != "30s" || inv["staleAfter"] != "3m0s" || inv["settleTime"] != "30s" {
		t.Errorf("inventory = %v", inv)
	}
	if cl["url"] != "https://xoa.example.com" || cl["token"] != Redacted {
		t.Errorf("url/token = %v / %v", cl["url"], cl["token"])
	}
}

func TestErrorsNeverHoldValidatedToken(t *testing.T) {
	cfg := validConfig()
	// The user pasted the token where a CIDR belongs: Validate must not echo it.
	cfg.Addresses.InternalCIDRs = []string{testToken}
	err := cfg.Validate()
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) || len(agg.Errors()) != 1 {
		t.Fatalf("Validate = %v, want one problem", err)
	}
	if strings.Contains(err.Error(), testToken) {
		t.Errorf("error leaks the token: %v", err)
	}
}
