package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// fuzzSecret replaces every "@T@" in the fuzzed file, and is the content of the token file
// "tok". It is in no seed, so it appears in output only if the loader copies it there.
const fuzzSecret = "Fz9-qR2-token-7Yw4LmXk0pVb"

// fuzzReadFile serves the token file "tok" (relative to /cfg or absolute) and nothing else:
// the fuzzer must not read the real file system.
func fuzzReadFile(name string) ([]byte, error) {
	if name == "/cfg/tok" || name == "/tok" {
		return []byte(fuzzSecret + "\n"), nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

func FuzzLoad(f *testing.F) {
	example, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(example),
		base,
		"url: https://xoa.example.com\ntoken: @T@\n",
		"url: https://xoa.example.com\ntokenFile: tok\n",
		"url: https://xoa.example.com\ntoken: !!int @T@\n",
		"url: https://@T@@xoa.example.com\ntoken: @T@\nrequestTimeout: @T@\n",
		"token: @T@\naddresses: {internalCIDRs: [@T@, 10.0.0.1/8]}\nlabels: {tagLabelPrefixes: [@T@]}\n",
		"token: @T@\ninventory: {resyncPeriodd: 1m, pollPeriod: x}\n@T@: 1\n",
		`{"url": "https://xoa.example.com", "token": "@T@", "lifecycle": {"outOfServiceTaint": "@T@"}}`,
		"token: [@T@]\npassword: @T@\nusername: u\n",
		"url: [\ntoken: @T@\n",
		"- @T@\n",
		"a: &x [*x]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc := bytes.ReplaceAll(data, []byte("@T@"), []byte(fuzzSecret))
		l := loader{readFile: fuzzReadFile, dir: "/cfg"}

		// With the secret as XOA_TOKEN, the loader knows it is a secret whatever the file
		// does with it: no error may hold it.
		l.env = envOf(EnvToken, fuzzSecret)
		cfg, err := l.load(doc)
		checkLoadResult(t, cfg, err, true)

		// From the file alone: the secret must not leak when the file makes it the token.
		l.env = nil
		cfg, err = l.load(doc)
		var m map[string]any
		isToken := false
		if yaml.Unmarshal(doc, &m) == nil {
			tf, _ := m["tokenFile"].(string)
			isToken = m["token"] == fuzzSecret || m["password"] == fuzzSecret || tf == "tok" || tf == "/tok"
		}
		checkLoadResult(t, cfg, err, isToken)
	})
}

func checkLoadResult(t *testing.T, cfg *Config, err error, secret bool) {
	t.Helper()
	if (cfg == nil) == (err == nil) {
		t.Fatalf("load returned config %v and error %v", cfg != nil, err)
	}
	if err != nil {
		var errs Errors
		if !errors.As(err, &errs) || len(errs) == 0 {
			t.Fatalf("error %v (%T) is no Errors", err, err)
		}
		for _, e := range errs {
			if e.Message == "" {
				t.Errorf("problem at %q has no message", e.Path)
			}
		}
		if secret && strings.Contains(err.Error(), fuzzSecret) {
			t.Fatalf("error leaks the token: %v", err)
		}
		return
	}
	if err := cfg.Validate(); err != nil && !strings.Contains(err.Error(), "caFile") {
		t.Errorf("loaded config does not validate: %v", err)
	}
	// Only the token field of a copy: the fuzzer may put the secret in other fields too.
	c := Config{Token: cfg.Token, RequestTimeout: cfg.RequestTimeout, Inventory: cfg.Inventory}
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	out := string(j) + fmt.Sprintf("%v %+v %#v %s", c, c, c, c.Token)
	if strings.Contains(out, fuzzSecret) {
		t.Fatalf("printed config leaks the token: %s", out)
	}
}
