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

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
		"token: *@T@\n",
		"url: https://xoa.example.com\n---\ntoken: @T@\n",
		"clusters:\n- {url: https://a.example.com, token: @T@, pools: [p, @T@], region: @T@}\n- url: https://b.example.com\n  tokenFile: /tok\n  name: @T@\n",
		"clusters: &c [{url: https://a, token: @T@}, *c]\ntopology: {region: server, zone: @T@}\nnodes: {ignoreSelector: \"@T@ in (\"}\n",
		"inventory: {settleTime: @T@}\nclusters: []\nurl: https://x\n",
		"tokEn: @T@\nx: {Password: [@T@]}\nrequestTimeout: @T@\n",
		"clusters: [{url: https://a, token: t0k}]\ntoken: @T@\ntokenfile: tok\nrequestTimeout: @T@\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc := bytes.ReplaceAll(data, []byte("@T@"), []byte(fuzzSecret))
		// With the secret as XOA_TOKEN, the loader knows it is a secret whatever the file
		// does with it: no error may hold it.
		cfg, err := load(doc, "/cfg", envOf(EnvToken, fuzzSecret), fuzzReadFile)
		checkLoadResult(t, cfg, err, true)

		// From the file alone: the secret must not leak when the file makes it a token, or the
		// loader read it from the token file.
		read := false
		cfg, err = load(doc, "/cfg", nil, func(name string) ([]byte, error) {
			b, err := fuzzReadFile(name)
			read = read || err == nil
			return b, err
		})
		checkLoadResult(t, cfg, err, read || isToken(doc))
	})
}

// isToken reports whether doc gives fuzzSecret as a token or password (single form or
// clusters entry), under its key in any case: the loader also redacts values under keys spelt
// like them.
func isToken(doc []byte) bool {
	var m struct {
		Token, Password string
		Clusters        []struct{ Token string }
	}
	// Lax, and matching keys in any case: a doc the loader refuses may still set the token.
	_ = yaml.Unmarshal(doc, &m)
	found := m.Token == fuzzSecret || m.Password == fuzzSecret
	for _, c := range m.Clusters {
		found = found || c.Token == fuzzSecret
	}
	return found
}

func checkLoadResult(t *testing.T, cfg *Config, err error, secret bool) {
	t.Helper()
	if (cfg == nil) == (err == nil) {
		t.Fatalf("load returned config %v and error %v", cfg != nil, err)
	}
	if err != nil {
		var agg utilerrors.Aggregate
		if errors.As(err, &agg) {
			for _, e := range agg.Errors() {
				var fe *field.Error
				if !errors.As(e, &fe) || fe.Field == "" || fe.ErrorBody() == "" {
					t.Errorf("problem %v (%T) names no key or says nothing", e, e)
				}
			}
		}
		if err.Error() == "" {
			t.Error("empty error")
		}
		if secret && strings.Contains(err.Error(), fuzzSecret) {
			t.Fatalf("error leaks the token: %v", err)
		}
		return
	}
	if len(cfg.Clusters) == 0 {
		t.Fatal("loaded config has no cluster")
	}
	if err := cfg.Validate(); err != nil && !strings.Contains(err.Error(), "caFile") {
		t.Errorf("loaded config does not validate: %v", err)
	}
	// Only the token fields of a copy: the fuzzer may put the secret in other fields too.
	c := Config{Inventory: cfg.Inventory}
	for _, cl := range cfg.Clusters {
		c.Clusters = append(c.Clusters, Cluster{Token: cl.Token, RequestTimeout: cl.RequestTimeout})
	}
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	y, err := c.Effective()
	if err != nil {
		t.Fatalf("Effective: %v", err)
	}
	out := string(j) + string(y) + fmt.Sprintf("%v %+v %#v %s", c, c, c, c.Clusters[0].Token)
	if strings.Contains(out, fuzzSecret) {
		t.Fatalf("printed config leaks the token: %s", out)
	}
}
