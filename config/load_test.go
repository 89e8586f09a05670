package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// base is the smallest valid file.
const base = "url: https://xoa.example.com\ntoken: " + testToken + "\n"

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func loadString(t *testing.T, content string, env func(string) string) (*Config, error) {
	t.Helper()
	// Not t.TempDir: its name holds the test's name, which may hold the token, and the
	// error names the file.
	dir, err := os.MkdirTemp("", "config-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return Load(writeFile(t, dir, "config.yaml", content), env)
}

// problemsOf returns the problems of err, failing if err is no aggregate of *field.Error.
func problemsOf(t *testing.T, err error) []*field.Error {
	t.Helper()
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		t.Fatalf("error %v (%T) does not wrap an Aggregate", err, err)
	}
	var out []*field.Error
	for _, e := range agg.Errors() {
		var fe *field.Error
		if !errors.As(e, &fe) {
			t.Fatalf("problem %v (%T) is no *field.Error", e, e)
		}
		out = append(out, fe)
	}
	return out
}

func pathsOf(t *testing.T, err error) []string {
	t.Helper()
	var out []string
	for _, e := range problemsOf(t, err) {
		out = append(out, e.Field)
	}
	return out
}

// server is the Cluster the single form https://xoa.example.com with testToken gives.
func server() Cluster {
	return Cluster{Name: "xoa.example.com", URL: "https://xoa.example.com", Token: testToken,
		RequestTimeout: DefaultRequestTimeout, ListTimeout: DefaultListTimeout}
}

func TestLoadMinimalAppliesDefaults(t *testing.T) {
	got, err := loadString(t, base, nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Default()
	want.Clusters = []Cluster{server()}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load = %+v\nwant %+v", got, want)
	}
}

// keysOf returns the JSON keys of t's fields and, under "<key>.", of its struct fields and
// lists of structs.
func keysOf(t reflect.Type, prefix string) []string {
	var keys []string
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || name == "" {
			continue
		}
		keys = append(keys, prefix+name)
		typ := f.Type
		if typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() == reflect.Struct {
			keys = append(keys, keysOf(typ, prefix+name+".")...)
		}
	}
	return keys
}

// boolKeys returns the keys of t's bool fields, as keysOf writes them.
func boolKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || name == "" {
			continue
		}
		typ := f.Type
		if typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		switch {
		case isBool(typ):
			keys = append(keys, prefix+name)
		case typ.Kind() == reflect.Struct:
			keys = append(keys, boolKeys(typ, prefix+name+".")...)
		}
	}
	return keys
}

// TestBooleansUnquoted checks every boolean key of the file, found by reflection, in both forms:
// only a YAML boolean (true or false unquoted, any case) is one. yaml.v3 alone decodes the
// strings "yes", "on" and "y" (YAML 1.1 booleans, quoted or not) into a bool as true: a quoted
// "yes" would quietly turn TLS verification off, while a quoted "true" was refused.
func TestBooleansUnquoted(t *testing.T) {
	keys := slices.Concat(boolKeys(reflect.TypeFor[Config](), ""), boolKeys(reflect.TypeFor[Cluster](), ""))
	if want := []string{"clusters.enabled", "clusters.insecure", "lifecycle.outOfServiceTaint", "enabled", "insecure"}; !slices.Equal(keys, want) {
		t.Fatalf("boolean keys %v, want %v: add the new ones here", keys, want)
	}
	// file returns a file setting key to value, and the path of key in a problem.
	file := func(key, value string) (string, string) {
		switch section, name, nested := strings.Cut(key, "."); {
		case section == "clusters":
			// A second entry: one enabled entry at least is required.
			return "clusters:\n- url: https://xoa.example.com\n  token: " + testToken + "\n  " + name + ": " + value +
				"\n- url: https://xob.example.com\n  token: " + testToken + "\n", "clusters[0]." + name
		case nested:
			return section + ": {" + name + ": " + value + "}\n" + base, key
		}
		return key + ": " + value + "\n" + base, key
	}
	// get returns the value key has in c.
	get := func(c *Config, key string) bool {
		v := reflect.ValueOf(*c)
		if key == "insecure" || key == "enabled" {
			key = "clusters." + key
		}
		for _, name := range strings.Split(key, ".") {
			if v.Kind() == reflect.Slice {
				v = v.Index(0)
			}
			for _, f := range reflect.VisibleFields(v.Type()) {
				if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n == name {
					v = v.FieldByIndex(f.Index)
					break
				}
			}
		}
		if v.Kind() == reflect.Pointer {
			return v.IsNil() || v.Elem().Bool()
		}
		return v.Bool()
	}
	accepted := map[string]bool{"true": true, "false": false, "True": true, "FALSE": false, "!!bool true": true}
	refused := []string{`"true"`, `'false'`, `"yes"`, `"on"`, `"y"`, `"Y"`, `"1"`, "yes", "on", "off", "y", "n", `""`}
	for _, key := range keys {
		for value, want := range accepted {
			if key == "enabled" && !want {
				continue // switches off the only server: refused (TestClusters)
			}
			t.Run(key+"="+value, func(t *testing.T) {
				content, _ := file(key, value)
				c, err := loadString(t, content, nil)
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if got := get(c, key); got != want {
					t.Errorf("%s = %v, want %v", key, got, want)
				}
			})
		}
		for _, value := range refused {
			t.Run(key+"="+value, func(t *testing.T) {
				content, path := file(key, value)
				_, err := loadString(t, content, nil)
				if err == nil {
					t.Fatal("Load succeeded")
				}
				probs := problemsOf(t, err)
				if len(probs) != 1 || probs[0].Field != path || !strings.HasSuffix(probs[0].Detail, "must be true or false, unquoted") {
					t.Errorf("problems %v, want one at %s: must be true or false, unquoted", err, path)
				}
			})
		}
	}
}

func TestLoadExample(t *testing.T) {
	got, err := Load("testdata/example.yaml", nil)
	if err != nil {
		t.Fatalf("Load(example): %v", err)
	}
	want := Default()
	want.Clusters = []Cluster{server()}
	want.Clusters[0].Token = "example-token-0123456789abcdefghijklmnopqrstuvw"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("example = %+v\nwant defaults %+v", got, want)
	}

	// The example documents every key, commented out or not.
	raw, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keysOf(reflect.TypeFor[file](), "") {
		if k == "username" || k == "password" {
			continue // rejected keys, explained in the header
		}
		name := k[strings.LastIndex(k, ".")+1:]
		if !regexp.MustCompile(`(?m)^[#\s-]*` + name + `:`).Match(raw) {
			t.Errorf("example.yaml does not document %s", k)
		}
	}

	// Its clusters form, uncommented instead of the single-server keys, is valid too.
	single, clusters, ok := strings.Cut(string(raw), "\n# clusters:")
	if !ok {
		t.Fatal("example.yaml has no clusters example")
	}
	single = regexp.MustCompile(`(?m)^(url|token|insecure):.*$`).ReplaceAllString(single, "")
	clusters = regexp.MustCompile(`(?m)^# ?`).ReplaceAllString("clusters:"+clusters, "")
	_, caPEM := serverCA(t)
	files := map[string]string{"/etc/xenorchestra/paris-token": "paris-token-0123456789abcdef", "/etc/xenorchestra/lab-ca.crt": caPEM}
	c, err := load([]byte(single+"\n"+clusters), "", nil, func(name string) ([]byte, error) {
		if s, ok := files[name]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	})
	if err != nil {
		t.Fatalf("example.yaml's clusters form: %v\n%s", err, clusters)
	}
	if len(c.Clusters) != 3 || c.Clusters[0].Name != "paris" || c.Clusters[1].Name != "xo-lab.example.com:8443" ||
		c.Clusters[1].RequestTimeout != 30*time.Second || c.Clusters[0].RequestTimeout != DefaultRequestTimeout ||
		!c.Clusters[0].IsEnabled() || c.Clusters[2].IsEnabled() {
		t.Errorf("example.yaml's clusters form = %+v", c.Clusters)
	}
}

func TestLoadJSONFile(t *testing.T) {
	got, err := loadString(t, `{"url": "https://xo.example.com/", "token": "`+testToken+`", "inventory": {"pollPeriod": "5s"}}`, nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got.Clusters[0].URL != "https://xo.example.com" || got.Inventory.PollPeriod != 5*time.Second {
		t.Errorf("got %+v", got)
	}
}

func TestLoadEnvOnly(t *testing.T) {
	// XOA_URL is trimmed, as XOA_TOKEN: a value from a Secret often ends in a newline.
	got, err := Load("", envOf(EnvURL, " https://xoa.example.com/\n", EnvToken, testToken+"\n", EnvInsecure, "true"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Default()
	want.Clusters = []Cluster{server()}
	want.Clusters[0].Insecure = true
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load = %+v\nwant %+v", got, want)
	}
	_, err = Load("", nil)
	if got := pathsOf(t, err); !slices.Equal(got, []string{"url", "token"}) {
		t.Errorf("empty environment: problems at %v, want [url token]", got)
	}
	if !strings.HasPrefix(err.Error(), "config from environment: ") {
		t.Errorf("error %q does not say where the config came from", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}
	_, err = Load(t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Load(dir) = %v", err)
	}
}

func TestPrecedence(t *testing.T) {
	const envToken = "env-TOKEN-abcdefghijklmnop"
	tests := []struct {
		name         string
		file         string
		env          func(string) string
		wantURL      string
		wantToken    string
		wantInsecure bool
		wantErrPaths []string
	}{
		{
			name:      "file wins over env",
			file:      "url: https://file.example.com\ntoken: " + testToken + "\ninsecure: false\n",
			env:       envOf(EnvURL, "https://env.example.com", EnvToken, envToken, EnvInsecure, "true"),
			wantURL:   "https://file.example.com",
			wantToken: testToken,
		},
		{
			name:         "env fills absent keys",
			file:         "requestTimeout: 20s\n",
			env:          envOf(EnvURL, "https://env.example.com", EnvToken, envToken, EnvInsecure, "1"),
			wantURL:      "https://env.example.com",
			wantToken:    envToken,
			wantInsecure: true,
		},
		{
			name:      "env fills null and empty keys",
			file:      "url: \"\"\ntoken: null\ninsecure: ~\n",
			env:       envOf(EnvURL, "https://env.example.com", EnvToken, envToken, EnvInsecure, "false"),
			wantURL:   "https://env.example.com",
			wantToken: envToken,
		},
		{
			name:         "comment-only file",
			file:         "# nothing here yet\n",
			env:          envOf(EnvURL, "https://env.example.com", EnvToken, envToken, EnvInsecure, "yes"),
			wantErrPaths: []string{EnvInsecure},
		},
		{
			name:      "comment-only file, env complete",
			file:      "# nothing here yet\n",
			env:       envOf(EnvURL, "https://env.example.com", EnvToken, envToken),
			wantURL:   "https://env.example.com",
			wantToken: envToken,
		},
		{
			name:         "file insecure true wins over env false",
			file:         base + "insecure: true\n",
			env:          envOf(EnvInsecure, "false"),
			wantURL:      "https://xoa.example.com",
			wantToken:    testToken,
			wantInsecure: true,
		},
		{
			name:         "bad XOA_INSECURE named",
			file:         base,
			env:          envOf(EnvInsecure, "maybe"),
			wantErrPaths: []string{EnvInsecure},
		},
		{
			name:      "bad XOA_INSECURE ignored when the file sets insecure",
			file:      base + "insecure: false\n",
			env:       envOf(EnvInsecure, "maybe"),
			wantURL:   "https://xoa.example.com",
			wantToken: testToken,
		},
		{
			name:         "ill-typed file key is reported, not filled from env",
			file:         "url: [a]\ntoken: " + testToken + "\n",
			env:          envOf(EnvURL, "https://env.example.com"),
			wantErrPaths: []string{"url"},
		},
		{
			name:         "bad url from env is named after the variable",
			file:         "token: " + testToken + "\n",
			env:          envOf(EnvURL, "ftp://env.example.com"),
			wantErrPaths: []string{EnvURL},
		},
		{
			name:         "bad token from env is named after the variable",
			file:         "url: https://xoa.example.com\n",
			env:          envOf(EnvToken, "two words"),
			wantErrPaths: []string{EnvToken},
		},
		{
			name:         "XOA_USER and XOA_PASSWORD rejected",
			file:         base,
			env:          envOf(EnvUser, "admin", EnvPassword, "hunter22"),
			wantErrPaths: []string{EnvUser, EnvPassword},
		},
		{
			name:         "XOA_URL, XOA_TOKEN and XOA_INSECURE refused with clusters",
			file:         "clusters: [{url: https://a.example.com, token: " + testToken + "}]\n",
			env:          envOf(EnvURL, "https://env.example.com", EnvToken, envToken, EnvInsecure, "true"),
			wantErrPaths: []string{EnvURL, EnvToken, EnvInsecure},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadString(t, tt.file, tt.env)
			if tt.wantErrPaths != nil {
				if err == nil {
					t.Fatalf("Load succeeded, want problems at %v", tt.wantErrPaths)
				}
				if paths := pathsOf(t, err); !slices.Equal(paths, tt.wantErrPaths) {
					t.Errorf("problems %v, want paths %v", err, tt.wantErrPaths)
				}
				if strings.Contains(err.Error(), envToken) || strings.Contains(err.Error(), testToken) {
					t.Errorf("error leaks a token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if len(got.Clusters) != 1 {
				t.Fatalf("%d clusters, want 1", len(got.Clusters))
			}
			cl := got.Clusters[0]
			if cl.URL != tt.wantURL || cl.Token.Reveal() != tt.wantToken || cl.Insecure != tt.wantInsecure {
				t.Errorf("url=%q insecure=%v token-is-%s", cl.URL, cl.Insecure, whichToken(cl.Token, envToken))
			}
		})
	}
}

func whichToken(s Secret, envToken string) string {
	switch s.Reveal() {
	case testToken:
		return "file"
	case envToken:
		return "env"
	}
	return "other"
}

func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "token", "\n  "+testToken+"  \n\n")
	writeFile(t, dir, "empty", " \n\t\n")
	writeFile(t, dir, "spaced", "two words\n")
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(dir, "token")
	tests := []struct {
		name         string
		file         string
		env          func(string) string
		wantErrPaths []string
		wantMsg      string
	}{
		{name: "relative to the config file", file: "tokenFile: token\n"},
		{name: "absolute", file: "tokenFile: " + abs + "\n"},
		{name: "wins over XOA_TOKEN", file: "tokenFile: token\n", env: envOf(EnvToken, "env-token-zzzzzzzz")},
		{name: "with token", file: "tokenFile: token\ntoken: other-token-xxxx\n", wantErrPaths: []string{"tokenFile"}, wantMsg: "not both"},
		{name: "missing file", file: "tokenFile: nope\n", wantErrPaths: []string{"tokenFile"}, wantMsg: "no such file"},
		{name: "empty file", file: "tokenFile: empty\n", wantErrPaths: []string{"tokenFile"}, wantMsg: "is empty"},
		{name: "directory", file: "tokenFile: sub\n", wantErrPaths: []string{"tokenFile"}, wantMsg: "not a regular file"},
		{name: "bad content", file: "tokenFile: spaced\n", wantErrPaths: []string{"tokenFile"}, wantMsg: "cookie"},
		{name: "not a string", file: "tokenFile: [a]\n", wantErrPaths: []string{"tokenFile"}, wantMsg: "must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, dir, "config.yaml", "url: https://xoa.example.com\n"+tt.file)
			got, err := Load(path, tt.env)
			if tt.wantErrPaths != nil {
				if err == nil {
					t.Fatal("Load succeeded, want an error")
				}
				if paths := pathsOf(t, err); !slices.Equal(paths, tt.wantErrPaths) {
					t.Errorf("problems %v, want paths %v", err, tt.wantErrPaths)
				}
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %v, want it to mention %q", err, tt.wantMsg)
				}
				if strings.Contains(err.Error(), testToken) {
					t.Errorf("error leaks the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got.Clusters[0].Token.Reveal() != testToken {
				t.Errorf("token not read from the file (trimmed)")
			}
			if got.Clusters[0].TokenFile != abs {
				t.Errorf("TokenFile = %q, want %q", got.Clusters[0].TokenFile, abs)
			}
		})
	}
}

// TestKeyValidation checks each key of the single form and the sections: a valid value
// loads (and is normalised as wanted), an invalid one is reported under the key's path with
// a telling message.
func TestKeyValidation(t *testing.T) {
	cl := func(c *Config) *Cluster { return &c.Clusters[0] }
	tests := []struct {
		name    string
		extra   string // prepended to a file with url and token (unless it sets them)
		check   func(*Config) bool
		path    string // "" when valid
		wantMsg string
	}{
		// url
		{"url trailing slash", "url: https://xoa.example.com///\n", func(c *Config) bool { return cl(c).URL == "https://xoa.example.com" }, "", ""},
		{"url base path", "url: HTTPS://Proxy.example.com/xo/\n", func(c *Config) bool {
			return cl(c).URL == "https://proxy.example.com/xo" && cl(c).Name == "proxy.example.com"
		}, "", ""},
		{"url http and port", "url: http://10.0.0.1:8080\n", func(c *Config) bool {
			return cl(c).URL == "http://10.0.0.1:8080" && cl(c).Name == "10.0.0.1:8080"
		}, "", ""},
		{"url ipv6", "url: https://[fd00::1]:443/\n", func(c *Config) bool { return cl(c).URL == "https://[fd00::1]:443" }, "", ""},
		{"url scheme", "url: ftp://xoa.example.com\n", nil, "url", `scheme "ftp"`},
		{"url ws scheme", "url: wss://xoa.example.com\n", nil, "url", "want http or https"},
		{"url no scheme", "url: xoa.example.com\n", nil, "url", "must start with http"},
		{"url host:port no scheme", "url: xoa.example.com:443\n", nil, "url", "must start with http"},
		{"url number", "url: 5\n", nil, "url", "must start with http"},
		{"url credentials", "url: https://admin:hunter22@xoa.example.com\n", nil, "url", "credentials"},
		{"url no host", "url: https:///path\n", nil, "url", "no host"},
		{"url bad port", "url: https://xoa.example.com:99999\n", nil, "url", "port"},
		{"url query", "url: https://xoa.example.com/?a=b\n", nil, "url", "query"},
		{"url fragment", "url: https://xoa.example.com/#x\n", nil, "url", "fragment"},
		{"url rest path", "url: https://xoa.example.com/rest/v0\n", nil, "url", "without /rest/v0"},
		{"url unparsable", "url: \"https://xo%zz.example.com\"\n", nil, "url", "not a valid URL"},
		// Quoted, a space at either end stays, and would become %20 in the path.
		{"url trailing space", "url: \"https://xoa.example.com/ \"\n", nil, "url", "must not contain whitespace"},
		{"url leading space", "url: \" https://xoa.example.com\"\n", nil, "url", "must not contain whitespace"},
		{"url trailing newline", "url: \"https://xoa.example.com\\n\"\n", nil, "url", "must not contain whitespace"},
		{"url space inside", "url: \"https://xo a.example.com\"\n", nil, "url", "must not contain whitespace"},
		{"url space in path", "url: \"https://xoa.example.com/x o\"\n", nil, "url", "must not contain whitespace"},
		{"url tab", "url: \"https://xoa.example.com\\t\"\n", nil, "url", "must not contain whitespace"},
		{"url no-break space", "url: \"https://xoa.example.com/\u00a0\"\n", nil, "url", "must not contain whitespace"},
		{"url escaped space kept", "url: https://xoa.example.com/x%20o/\n", func(c *Config) bool { return cl(c).URL == "https://xoa.example.com/x%20o" }, "", ""},
		{"url type", "url: [a]\n", nil, "url", "line 1: must be a string, not a list"},
		// name
		{"name", "name: lab\n", func(c *Config) bool { return cl(c).Name == "lab" }, "", ""},
		// insecure
		{"insecure true", "insecure: true\n", func(c *Config) bool { return cl(c).Insecure }, "", ""},
		{"insecure string", "insecure: \"maybe\"\n", nil, "insecure", `"maybe": line 1: must be true or false`},
		{"insecure number", "insecure: 1\n", nil, "insecure", "must be true or false, not a number"},
		// token
		{"token number keeps its text", "token: 0123456\n", func(c *Config) bool { return cl(c).Token.Reveal() == "0123456" }, "", ""},
		{"token space", "token: \"a b c d\"\n", nil, "token", "cookie"},
		{"token semicolon", "token: \"abc;def\"\n", nil, "token", "cookie"},
		{"token non-ascii", "token: \"abcdé\"\n", nil, "token", "cookie"},
		{"token too long", "token: " + strings.Repeat("a", 5000) + "\n", nil, "token", "longer than"},
		{"token list", "token: [a]\n", nil, "token", "must be a string, not a list"},
		// requestTimeout, listTimeout
		{"requestTimeout", "requestTimeout: 1m30s\n", func(c *Config) bool { return cl(c).RequestTimeout == 90*time.Second }, "", ""},
		{"requestTimeout min", "requestTimeout: 1s\n", func(c *Config) bool { return cl(c).RequestTimeout == time.Second }, "", ""},
		{"requestTimeout max", "requestTimeout: 5m\n", func(c *Config) bool { return cl(c).RequestTimeout == 5*time.Minute }, "", ""},
		{"requestTimeout too short", "requestTimeout: 999ms\n", nil, "requestTimeout", "must be between 1s and 5m"},
		{"requestTimeout too long", "requestTimeout: 5m1s\n", nil, "requestTimeout", "between 1s and 5m"},
		{"requestTimeout zero", "requestTimeout: 0s\n", nil, "requestTimeout", `"0s": must be between 1s`},
		{"requestTimeout negative", "requestTimeout: -5s\n", nil, "requestTimeout", "between 1s"},
		{"requestTimeout bad", "requestTimeout: 30x\n", nil, "requestTimeout", `"30x": line 1: must be a duration such as "30s"`},
		{"requestTimeout number", "requestTimeout: 30\n", nil, "requestTimeout", "must be a duration such as \"30s\", \"5m\" or \"1h\", not a number"},
		{"listTimeout", "listTimeout: 10m\n", func(c *Config) bool { return cl(c).ListTimeout == 10*time.Minute }, "", ""},
		{"listTimeout too short", "listTimeout: 5s\n", nil, "listTimeout", "between 10s and 30m"},
		// region, pools
		{"region", "region: eu-west_1.a\n", func(c *Config) bool { return cl(c).Region == "eu-west_1.a" }, "", ""},
		{"region not a label value", "region: \"eu west\"\n", nil, "region", "valid label"},
		{"region too long", "region: " + strings.Repeat("a", 64) + "\n", nil, "region", "63"},
		{"pools", "pools: [8a3f1c2e-9d1b-4e6f-a2c4-5b7d9e1f3a60, Prod pool]\n", func(c *Config) bool {
			return slices.Equal(cl(c).Pools, []string{"8a3f1c2e-9d1b-4e6f-a2c4-5b7d9e1f3a60", "Prod pool"})
		}, "", ""},
		{"pools names differing in case", "pools: [prod, Prod]\n", func(c *Config) bool { return len(cl(c).Pools) == 2 }, "", ""},
		{"pools empty entry", "pools: [a, \"\"]\n", nil, "pools[1]", "Required value"},
		{"pools same name twice", "pools: [prod, prod]\n", nil, "pools[1]", "also at pools[0]"},
		{"pools same uuid twice", "pools: [8a3f1c2e-9d1b-4e6f-a2c4-5b7d9e1f3a60, 8A3F1C2E-9D1B-4E6F-A2C4-5B7D9E1F3A60]\n", nil, "pools[1]", "Duplicate value"},
		{"pools not a list", "pools: prod\n", nil, "pools", "must be a list"},
		// inventory
		{"resyncPeriod", "inventory: {resyncPeriod: 1h}\n", func(c *Config) bool { return c.Inventory.ResyncPeriod == time.Hour }, "", ""},
		{"resyncPeriod too short", "inventory: {resyncPeriod: 10s}\n", nil, "inventory.resyncPeriod", "between 30s and 24h"},
		{"resyncPeriod too long", "inventory: {resyncPeriod: 25h}\n", nil, "inventory.resyncPeriod", "between 30s and 24h"},
		{"pollPeriod", "inventory: {pollPeriod: 1s, staleAfter: 2s}\n", func(c *Config) bool {
			return c.Inventory.PollPeriod == time.Second && c.Inventory.StaleAfter == 2*time.Second
		}, "", ""},
		{"pollPeriod too short", "inventory: {pollPeriod: 500ms}\n", nil, "inventory.pollPeriod", "between 1s and 1h"},
		{"pollPeriod too long", "inventory: {pollPeriod: 2h, staleAfter: 3h}\n", nil, "inventory.pollPeriod", "between 1s and 1h"},
		{"staleAfter equal pollPeriod", "inventory: {pollPeriod: 1m, staleAfter: 1m}\n", nil, "inventory.staleAfter", "greater than inventory.pollPeriod (1m)"},
		{"staleAfter below default pollPeriod", "inventory: {staleAfter: 10s}\n", nil, "inventory.staleAfter", "greater than inventory.pollPeriod (30s)"},
		{"staleAfter too long", "inventory: {staleAfter: 48h}\n", nil, "inventory.staleAfter", "at most 24h"},
		{"settleTime", "inventory: {settleTime: 10m}\n", func(c *Config) bool { return c.Inventory.SettleTime == 10*time.Minute }, "", ""},
		{"settleTime min", "inventory: {settleTime: 1s}\n", func(c *Config) bool { return c.Inventory.SettleTime == time.Second }, "", ""},
		{"settleTime too short", "inventory: {settleTime: 500ms}\n", nil, "inventory.settleTime", "between 1s and 10m"},
		{"settleTime too long", "inventory: {settleTime: 10m1s}\n", nil, "inventory.settleTime", "between 1s and 10m"},
		{"inventory not a map", "inventory: 5m\n", nil, "inventory", "must be a mapping of keys"},
		{"inventory null keeps defaults", "inventory: null\n", func(c *Config) bool { return c.Inventory == Default().Inventory }, "", ""},
		// labels
		{"prefixes", "labels: {tagLabelPrefixes: [example.com/, team.example.com/xo-], tagTaintPrefixes: []}\n", func(c *Config) bool {
			return slices.Equal(c.Labels.TagLabelPrefixes, []string{"example.com/", "team.example.com/xo-"}) &&
				c.Labels.TagTaintPrefixes != nil && len(c.Labels.TagTaintPrefixes) == 0
		}, "", ""},
		{"prefix reserved", "labels: {tagLabelPrefixes: [example.com/, kubernetes.io/]}\n", nil, "labels.tagLabelPrefixes[1]", `"kubernetes.io/": reserved`},
		{"prefix reserved k8s.io", "labels: {tagLabelPrefixes: [k8s.io/]}\n", nil, "labels.tagLabelPrefixes[0]", "reserved"},
		{"prefix reserved node-role", "labels: {tagLabelPrefixes: [node-role.kubernetes.io/]}\n", nil, "labels.tagLabelPrefixes[0]", "reserved"},
		{"prefix reserved node-restriction", "labels: {tagTaintPrefixes: [node-restriction.kubernetes.io/]}\n", nil, "labels.tagTaintPrefixes[0]", "reserved"},
		{"prefix reserved sub k8s.io", "labels: {tagTaintPrefixes: [a.b.k8s.io/x]}\n", nil, "labels.tagTaintPrefixes[0]", "reserved"},
		// The namespaces of the keys the controller computes: xo/node refuses every tag key in them.
		{"prefix reserved topology", "labels: {tagLabelPrefixes: [topology.k8s.xenorchestra/]}\n", nil, "labels.tagLabelPrefixes[0]", "reserved: the controller computes the keys under topology.k8s.xenorchestra/"},
		{"prefix reserved vm", "labels: {tagLabelPrefixes: [vm.k8s.xenorchestra/name]}\n", nil, "labels.tagLabelPrefixes[0]", "reserved"},
		{"prefix reserved node", "labels: {tagTaintPrefixes: [node.k8s.xenorchestra/]}\n", nil, "labels.tagTaintPrefixes[0]", "reserved"},
		{"prefix reserved sub topology", "labels: {tagTaintPrefixes: [a.topology.k8s.xenorchestra/]}\n", nil, "labels.tagTaintPrefixes[0]", "reserved"},
		{"prefix beside the computed ones allowed", "labels: {tagLabelPrefixes: [tag.k8s.xenorchestra/, k8s.xenorchestra/, topology.k8s.xenorchestra.example.com/]}\n", func(c *Config) bool {
			return len(c.Labels.TagLabelPrefixes) == 3
		}, "", ""},
		{"prefix lookalike allowed", "labels: {tagLabelPrefixes: [notkubernetes.io/, k8s.io.example.com/]}\n", func(c *Config) bool {
			return len(c.Labels.TagLabelPrefixes) == 2
		}, "", ""},
		{"prefix without slash", "labels: {tagLabelPrefixes: [node]}\n", nil, "labels.tagLabelPrefixes[0]", `followed by "/"`},
		{"prefix upper case domain", "labels: {tagLabelPrefixes: [Example.com/]}\n", nil, "labels.tagLabelPrefixes[0]", "DNS subdomain"},
		{"prefix empty domain", "labels: {tagLabelPrefixes: [/x]}\n", nil, "labels.tagLabelPrefixes[0]", "DNS subdomain"},
		{"prefix bad name start", "labels: {tagLabelPrefixes: [example.com/-x]}\n", nil, "labels.tagLabelPrefixes[0]", "start with"},
		{"prefix bad name char", "labels: {tagLabelPrefixes: [example.com/a/b]}\n", nil, "labels.tagLabelPrefixes[0]", "may hold only"},
		{"prefix name too long", "labels: {tagLabelPrefixes: [example.com/" + strings.Repeat("a", 63) + "]}\n", nil, "labels.tagLabelPrefixes[0]", "at most 62"},
		{"prefix not a string", "labels: {tagLabelPrefixes: [example.com/, [x]]}\n", nil, "labels.tagLabelPrefixes[1]", "must be a string, not a list"},
		{"prefixes not a list", "labels: {tagLabelPrefixes: example.com/}\n", nil, "labels.tagLabelPrefixes", "must be a list"},
		// addresses
		{"cidrs", "addresses: {internalCIDRs: [10.0.0.0/8, \"fd00::/8\"], externalCIDRs: [203.0.113.0/24]}\n", func(c *Config) bool {
			return len(c.Addresses.InternalPrefixes()) == 2 && c.Addresses.ExternalPrefixes()[0].String() == "203.0.113.0/24"
		}, "", ""},
		{"cidr host bits", "addresses: {internalCIDRs: [10.0.0.1/8]}\n", nil, "addresses.internalCIDRs[0]", `did you mean "10.0.0.0/8"`},
		{"cidr bad", "addresses: {externalCIDRs: [\"fd00::/8\", 10.0.0.0]}\n", nil, "addresses.externalCIDRs[1]", `"10.0.0.0": not a CIDR`},
		// lifecycle
		{"outOfServiceTaint", "lifecycle: {outOfServiceTaint: true}\n", func(c *Config) bool { return c.Lifecycle.OutOfServiceTaint }, "", ""},
		{"outOfServiceTaint type", "lifecycle: {outOfServiceTaint: \"maybe\"}\n", nil, "lifecycle.outOfServiceTaint", "true or false"},
		// topology
		{"topology names", "topology: {region: poolName, zone: hostName}\n", func(c *Config) bool {
			return c.Topology == Topology{Region: RegionPoolName, Zone: ZoneHostName}
		}, "", ""},
		{"topology server", "region: eu\ntopology: {region: server}\n", func(c *Config) bool {
			return c.Topology.Region == RegionServer && cl(c).Region == "eu"
		}, "", ""},
		{"topology server without region", "topology: {region: server}\n", nil, "region", `required when topology.region is "server"`},
		{"topology region unknown", "topology: {region: pool}\n", nil, "topology.region", `Unsupported value: "pool": supported values: "poolID", "poolName", "server"`},
		{"topology zone unknown", "topology: {zone: host}\n", nil, "topology.zone", `supported values: "hostID", "hostName"`},
		{"topology zone empty", "topology: {zone: \"\"}\n", nil, "topology.zone", "Unsupported value"},
		// nodes
		{"ignoreSelector", "nodes: {ignoreSelector: \"node-role.kubernetes.io/infra, !xo\"}\n", func(c *Config) bool {
			return c.Nodes.IgnoreSelector == "node-role.kubernetes.io/infra, !xo"
		}, "", ""},
		{"ignoreSelector invalid", "nodes: {ignoreSelector: \"a in (b\"}\n", nil, "nodes.ignoreSelector", "unable to parse"},
		{"ignoreSelector invalid key", "nodes: {ignoreSelector: \"-a=b\"}\n", nil, "nodes.ignoreSelector", "Invalid value"},
		// rejected keys
		{"username", "username: admin\n", nil, "username", "not supported"},
		{"password", "password: hunter22\n", nil, "password", "create-token"},
		{"empty username is unset", "username: \"\"\n", func(*Config) bool { return true }, "", ""},
		// CA
		{"caFile and caBundle", "caFile: /x\ncaBundle: hello\n", nil, "caBundle", "at most one"},
		{"caBundle garbage", "caBundle: hello\n", nil, "caBundle", "no PEM certificate"},
		{"caFile missing", "caFile: /nonexistent/ca.pem\n", nil, "caFile", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A later key would be a duplicate: put the case first and let base supply what
			// the case does not.
			content := tt.extra
			if !strings.HasPrefix(tt.extra, "url:") {
				content += "url: https://xoa.example.com\n"
			}
			if !strings.HasPrefix(tt.extra, "token:") {
				content += "token: " + testToken + "\n"
			}
			got, err := loadString(t, content, nil)
			if tt.path == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if !tt.check(got) {
					t.Errorf("unexpected config %+v", got)
				}
				return
			}
			if err == nil {
				t.Fatalf("Load succeeded, want a problem at %s", tt.path)
			}
			probs := problemsOf(t, err)
			if len(probs) != 1 || probs[0].Field != tt.path || !strings.Contains(probs[0].Error(), tt.wantMsg) {
				t.Errorf("problems %v, want one at %s mentioning %q", err, tt.path, tt.wantMsg)
			}
			if strings.Contains(err.Error(), testToken) {
				t.Errorf("error leaks the token: %v", err)
			}
		})
	}
}

func TestClusters(t *testing.T) {
	const tok2 = "second-TOKEN-0123456789abcdef"
	entry := func(url string, extra ...string) string {
		s := "- url: " + url + "\n  token: " + testToken + "\n"
		for _, e := range extra {
			s += "  " + e + "\n"
		}
		return s
	}
	two := "clusters:\n" + entry("https://a.example.com") + entry("https://b.example.com:8443/xo")

	t.Run("valid", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "tok2", tok2+"\n")
		file := "requestTimeout: 20s\nlistTimeout: 5m\ntopology: {region: server}\nclusters:\n" +
			entry("https://A.example.com/", "region: eu", "pools: [prod, 8a3f1c2e-9d1b-4e6f-a2c4-5b7d9e1f3a60]", "insecure: true") +
			"- name: lab\n  url: http://b.example.com:8080\n  tokenFile: tok2\n  requestTimeout: 3s\n  region: us\n  pools: [Prod]\n"
		got, err := Load(writeFile(t, dir, "c.yaml", file), nil)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		want := []Cluster{
			{Name: "a.example.com", URL: "https://a.example.com", Insecure: true, Token: testToken, RequestTimeout: 20 * time.Second,
				ListTimeout: 5 * time.Minute, Region: "eu", Pools: []string{"prod", "8a3f1c2e-9d1b-4e6f-a2c4-5b7d9e1f3a60"}},
			{Name: "lab", URL: "http://b.example.com:8080", Token: tok2, TokenFile: filepath.Join(dir, "tok2"), RequestTimeout: 3 * time.Second,
				ListTimeout: 5 * time.Minute, Region: "us", Pools: []string{"Prod"}},
		}
		if !reflect.DeepEqual(got.Clusters, want) {
			t.Errorf("clusters = %+v\nwant %+v", got.Clusters, want)
		}
		if !got.Clusters[0].IsEnabled() || !got.Clusters[1].IsEnabled() {
			t.Errorf("entries without enabled are not enabled: %+v", got.Clusters)
		}
		w := strings.Join(got.Warnings(), "\n")
		if !strings.Contains(w, "XO server a.example.com: insecure") || !strings.Contains(w, "XO server lab: url uses http") {
			t.Errorf("warnings do not name the servers: %s", w)
		}
	})

	tests := []struct {
		name  string
		file  string
		env   func(string) string
		paths []string
		msg   string
	}{
		{"empty list", "clusters: []\n", nil, []string{"clusters"}, "Required value"},
		{"not a list", "clusters: {url: https://a.example.com}\n", nil, []string{"clusters"}, "must be a list, not a mapping"},
		{"with top-level url and token", "url: https://a.example.com\ntoken: x\n" + two, nil, []string{"url", "token"},
			"single-server form: with clusters"},
		{"with top-level region and pools", "region: eu\npools: [a]\n" + two, nil, []string{"region", "pools"}, "single-server form"},
		{"top-level timeouts are defaults", "requestTimeout: 0s\n" + two, nil, []string{"requestTimeout"}, "between 1s and 5m"},
		{"entry timeout", "clusters:\n" + entry("https://a.example.com", "listTimeout: 1h"), nil, []string{"clusters[0].listTimeout"}, "between 10s and 30m"},
		{"missing url and token", "clusters:\n- name: a\n", nil, []string{"clusters[0].url", "clusters[0].token"}, "Required value"},
		{"null entry", "clusters: [null]\n", nil, []string{"clusters[0].url", "clusters[0].token"}, "Required value"},
		{"bad url", "clusters:\n" + entry("https://a.example.com") + entry("ftp://b.example.com"), nil, []string{"clusters[1].url"}, `scheme "ftp"`},
		{"duplicate url", "clusters:\n" + entry("https://a.example.com") + entry("HTTPS://A.example.com//"), nil,
			[]string{"clusters[1].url"}, `Duplicate value: "https://a.example.com": also at clusters[0].url`},
		{"duplicate url with names", "clusters:\n" + entry("https://a.example.com", "name: one") + entry("https://a.example.com/", "name: two"), nil,
			[]string{"clusters[1].url"}, "Duplicate value"},
		{"duplicate name", "clusters:\n" + entry("https://a.example.com", "name: xo") + entry("https://b.example.com", "name: xo"), nil,
			[]string{"clusters[1].name"}, `Duplicate value: "xo": also at clusters[0].name`},
		{"duplicate default name", "clusters:\n" + entry("https://a.example.com/one") + entry("https://a.example.com/two"), nil,
			[]string{"clusters[1].name"}, "defaults to the URL's host[:port]"},
		{"explicit name equal to a default one", "clusters:\n" + entry("https://a.example.com") + entry("https://b.example.com", "name: a.example.com"), nil,
			[]string{"clusters[1].name"}, "Duplicate value"},
		{"bad region", "clusters:\n" + entry("https://a.example.com", "region: -eu"), nil, []string{"clusters[0].region"}, "valid label"},
		{"region required by topology", "topology: {region: server}\nclusters:\n" + entry("https://a.example.com", "region: eu") + entry("https://b.example.com"), nil,
			[]string{"clusters[1].region"}, `required when topology.region is "server"`},
		{"same pool uuid in two scopes", "clusters:\n" + entry("https://a.example.com", "pools: [8a3f1c2e-9d1b-4e6f-a2c4-5b7d9e1f3a60]") +
			entry("https://b.example.com", "pools: [x, 8A3F1C2E-9D1B-4E6F-A2C4-5B7D9E1F3A60]"), nil,
			[]string{"clusters[1].pools[1]"}, "also at clusters[0].pools[0]: a pool is in one server's scope at most"},
		{"same pool name in two scopes", "clusters:\n" + entry("https://a.example.com", "pools: [prod]") + entry("https://b.example.com", "pools: [prod]"), nil,
			[]string{"clusters[1].pools[0]"}, "Duplicate value"},
		{"token and tokenFile", "clusters:\n" + entry("https://a.example.com", "tokenFile: /x"), nil, []string{"clusters[0].tokenFile"}, "not both"},
		{"missing token file", "clusters:\n- url: https://a.example.com\n  tokenFile: /nonexistent/tok\n", nil, []string{"clusters[0].tokenFile"}, "no such file"},
		{"bad token", "clusters:\n- url: https://a.example.com\n  token: \"a b\"\n", nil, []string{"clusters[0].token"}, "cookie"},
		{"unknown entry key", "clusters:\n" + entry("https://a.example.com", "tokn: x", "password: y"), nil,
			[]string{"clusters[0].tokn", "clusters[0].password"}, "line 4: unknown key (did you mean token?)"},
		{"entry key twice", "clusters:\n" + entry("https://a.example.com", "url: https://b.example.com"), nil,
			[]string{"clusters[0].url"}, "line 4: already set on line 2"},
		{"insecure env", two, envOf(EnvInsecure, "true"), []string{EnvInsecure}, "single-server form only"},
		{"every entry disabled", "clusters:\n" + entry("https://a.example.com", "enabled: false") + entry("https://b.example.com", "enabled: false"), nil,
			[]string{"clusters"}, "every entry has enabled: false: enable at least one"},
		{"the only entry disabled", "clusters:\n" + entry("https://a.example.com", "enabled: false"), nil,
			[]string{"clusters[0].enabled"}, "switches off the only XO server"},
		{"single-server form disabled", "url: https://a.example.com\ntoken: x-token\nenabled: false\n", nil,
			[]string{"enabled"}, "switches off the only XO server"},
		{"top-level enabled with clusters", "enabled: true\n" + two, nil, []string{"enabled"}, "single-server form: with clusters, set it in each entry"},
		{"a disabled entry is still checked", "clusters:\n" + entry("https://a.example.com") + "- {url: ftp://b.example.com, enabled: false}\n", nil,
			[]string{"clusters[1].url", "clusters[1].token"}, `scheme "ftp"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadString(t, tt.file, tt.env)
			if err == nil {
				t.Fatalf("Load succeeded, want problems at %v", tt.paths)
			}
			if got := pathsOf(t, err); !slices.Equal(got, tt.paths) {
				t.Errorf("problems %v, want paths %v", err, tt.paths)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %v, want it to mention %q", err, tt.msg)
			}
			if strings.Contains(err.Error(), testToken) {
				t.Errorf("error leaks the token: %v", err)
			}
		})
	}
}

// TestMergeKey: a YAML merge key is named as such, not as an unknown key, and what it merges
// is still searched for secrets.
func TestMergeKey(t *testing.T) {
	_, err := loadString(t, "defaults: &d {token: "+testToken+"}\n<<: *d\nurl: https://xoa.example.com\n", nil)
	if err == nil {
		t.Fatal("a merge key loaded")
	}
	probs := problemsOf(t, err)
	var merge *field.Error
	for _, p := range probs {
		if p.Field == `"<<"` {
			merge = p
		}
	}
	if merge == nil || merge.Detail != "line 2: YAML merge keys (<<) are not supported: write the keys out" {
		t.Errorf("problems %v, want one at \"<<\" saying merge keys are not supported", err)
	}
	if strings.Contains(err.Error(), testToken) {
		t.Errorf("error leaks the token: %v", err)
	}
}

func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"urll: x\n", []string{"urll: Unsupported value: line 3: unknown key (did you mean url?)"}},
		{"Token: x\n", []string{"Token: Unsupported value: line 3: unknown key (did you mean token?)"}},
		{"clientTimeout: 5s\n", []string{"clientTimeout: Unsupported value: line 3: unknown key (did you mean requestTimeout?)"}},
		{"zzz: 1\naaa: 2\n", []string{"zzz: Unsupported value: line 3: unknown key", "aaa: Unsupported value: line 4: unknown key"}},
		{"inventory: {resyncPeriodd: 1m}\n", []string{"inventory.resyncPeriodd: Unsupported value: line 3: unknown key (did you mean resyncPeriod?)"}},
		{"inventory:\n  settletime: 1m\n", []string{"inventory.settletime: Unsupported value: line 4: unknown key (did you mean settleTime?)"}},
		{"labels: {tagPrefixes: []}\n", []string{"labels.tagPrefixes: Unsupported value: line 3: unknown key"}},
		{"addresses: {internalCIDR: []}\n", []string{"addresses.internalCIDR: Unsupported value: line 3: unknown key (did you mean internalCIDRs?)"}},
		{"lifecycle: {outOfService: true}\n", []string{"lifecycle.outOfService: Unsupported value: line 3: unknown key"}},
		{"topology: {zones: hostID}\n", []string{"topology.zones: Unsupported value: line 3: unknown key (did you mean zone?)"}},
		{"nodes: {ignore: a=b}\n", []string{"nodes.ignore: Unsupported value: line 3: unknown key"}},
		{"cluster: []\n", []string{"cluster: Unsupported value: line 3: unknown key (did you mean clusters?)"}},
		{"inventory: {a.b: 1, \"x y\": 2}\n", []string{`inventory."a.b": Unsupported value: line 3: unknown key`, `inventory."x y": Unsupported value: line 3: unknown key`}},
		{"1: x\n", []string{"1: Unsupported value: line 3: unknown key"}},
		{"? [a]\n: x\n", []string{"?: Invalid value: line 3: a key must be a string, not a list"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := loadString(t, base+tt.file, nil)
			var got []string
			for _, e := range problemsOf(t, err) {
				got = append(got, e.Error())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("problems %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEveryErrorListed(t *testing.T) {
	file := `url: ftp://xoa.example.com
insecure: "maybe"
token: ` + testToken + `
inventory:
  resyncPeriodd: 1m
  pollPeriod: 100ms
labels:
  tagLabelPrefixes: [example.com/, kubernetes.io/]
topology: {zone: rack}
`
	_, err := loadString(t, file, nil)
	if err == nil {
		t.Fatal("Load succeeded")
	}
	// Decoding problems in the file's order, then the values' problems in the schema's.
	want := []string{"insecure", "inventory.resyncPeriodd", "url", "inventory.pollPeriod", "labels.tagLabelPrefixes[1]", "topology.zone"}
	if got := pathsOf(t, err); !slices.Equal(got, want) {
		t.Errorf("problems at %q, want %q (all of: %v)", got, want, err)
	}
	for _, s := range []string{"between 1s and 1h", `"kubernetes.io/": reserved`, "line 5: unknown key", "line 2: must be true or false", "config.yaml"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

// TestYAMLErrors checks that a file that is not one YAML mapping is refused with the parser's
// readable message (line included when it gives one) and without the token.
func TestYAMLErrors(t *testing.T) {
	tests := []struct {
		file string
		want string
	}{
		{"url: [\n", "invalid YAML: line 1: did not find expected node content"},
		{"url: https://xoa.example.com\ntoken: " + testToken + "\n\tinsecure: true\n", "found a tab character that violates indentation"},
		{"url: https://xoa.example.com\ntoken: \"" + testToken + "\"\n  x: 1\n", "invalid YAML: line 2: did not find expected key"},
		{"token: *" + testToken + "\n", "invalid YAML: unknown anchor '<redacted>' referenced"},
		{"Token: *" + testToken + "\n", "invalid YAML: unknown anchor '<redacted>' referenced"},
		{`{"url": "https://xoa.example.com", "token": "` + testToken + `", "x": *` + testToken + `}`, "unknown anchor '<redacted>' referenced"},
		{"url: https://xoa.example.com\n---\ntoken: " + testToken + "\n", "the file holds several YAML documents (the second starts on line 2)"},
		{base + "---\n", "several YAML documents"},
		{base + "---\n---\n", "several YAML documents"},
		{base + "--- [\n", "invalid YAML"},
		{"- url\n", "line 1: the file must be a mapping of keys (url: ..., token: ...), not a list"},
		{testToken + "\n", "the file must be a mapping of keys (url: ..., token: ...), not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := loadString(t, tt.file, nil)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q, want %q", msg, tt.want)
			}
			if strings.Contains(msg, testToken) {
				t.Errorf("error leaks the token: %v", msg)
			}
			if strings.Contains(msg, "hidden") {
				t.Errorf("error %q hides more than the token", msg)
			}
		})
	}
	// A document start before the only document, a document end after it, and a null
	// document are single documents.
	for _, f := range []string{"---\n" + base, base + "...\n", "---\n", "~\n"} {
		if _, err := loadString(t, f, envOf(EnvURL, "https://xoa.example.com", EnvToken, testToken)); err != nil {
			t.Errorf("Load(%q): %v", f, err)
		}
	}
}

// TestErrorsNeverHoldToken covers mistakes that put the token where a value is echoed.
func TestErrorsNeverHoldToken(t *testing.T) {
	files := []string{
		base + "requestTimeout: " + testToken + "\n",
		base + "addresses: {internalCIDRs: [" + testToken + "]}\n",
		base + "labels: {tagLabelPrefixes: [" + testToken + "]}\n",
		base + "topology: {region: " + testToken + "}\n",
		base + "nodes: {ignoreSelector: \"a in (" + testToken + "\"}\n",
		base + "name: x\nregion: \"" + testToken + "!\"\n",
		base + testToken + ": 1\n",
		base + "\"" + testToken + " x\": 1\n",
		"url: https://xoa.example.com\ntoken: " + testToken + "\ntokenFile: /x\n",
		"url: https://" + testToken + "@xoa.example.com\ntoken: " + testToken + "\n",
		"url: " + testToken + "\ntoken: " + testToken + "\n",
		"url: https://xoa.example.com\npassword: " + testToken + "\n",
		"url: https://xoa.example.com\ntoken: \"" + testToken + " \"\n",
		"url: https://xoa.example.com\ntoken: !!int " + testToken + "\n",
		"url: https://xoa.example.com\ntoken: !!binary " + testToken + "$\n",
		"clusters:\n- {url: https://a.example.com, token: " + testToken + ", requestTimeout: " + testToken + "}\n",
		// Under a misspelt key, or a key the form in use does not read, it is the token still.
		"url: https://xoa.example.com\ntokEn: " + testToken + "\nrequestTimeout: " + testToken + "\n",
		"url: https://xoa.example.com\ntokne: &t " + testToken + "\nrequestTimeout: *t\n",
		"url: https://xoa.example.com\nxo: {apiToken: [" + testToken + "]}\nrequestTimeout: " + testToken + "\n",
		"clusters:\n- {url: https://a.example.com, token: a-token, pasword: " + testToken + "}\nrequestTimeout: " + testToken + "\n",
		"clusters:\n- {url: https://a.example.com, token: a-token}\ntoken: " + testToken + "\nrequestTimeout: " + testToken + "\n",
	}
	for _, f := range files {
		_, err := loadString(t, f, nil)
		if err == nil {
			t.Errorf("Load(%q) succeeded", f)
			continue
		}
		if strings.Contains(err.Error(), testToken) {
			t.Errorf("error leaks the token: %v", err)
		}
	}
	// The token from the environment and from a token file is redacted too.
	_, err := loadString(t, "url: https://xoa.example.com\nrequestTimeout: "+testToken+"\n", envOf(EnvToken, testToken))
	if err == nil || strings.Contains(err.Error(), testToken) {
		t.Errorf("env token: error %v", err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "tok", testToken)
	_, err = Load(writeFile(t, dir, "c.yaml", "url: https://xoa.example.com\ntokenFile: tok\nrequestTimeout: "+testToken+"\n"), nil)
	if err == nil || strings.Contains(err.Error(), testToken) {
		t.Errorf("token file: error %v", err)
	}
}

// TestSecretsUnderTheWrongKey puts secrets of several shapes under the path-like keys, with no
// token elsewhere in the file that redaction could know them by: the error names the key and
// what it expects, and never shows the value (nor the path it resolves to). Token-shaped
// secrets are not shown under any other key either.
func TestSecretsUnderTheWrongKey(t *testing.T) {
	tokenShaped := []string{
		testToken,
		"Gq3vJ7kP0sXc9LmN2bT5wYz8AeRf4HuD6iOa1KlVbEc", // XO's shape: 32 random bytes in base64url
		"Zm9vYmFyMTIzNDU2Nzg5MEFCQ0RFRkdISUpL+/=",     // base64
	}
	others := []string{
		"hunter2",
		"P@ss w0rd!#$%^&*()[]{}",
		"pässwörd-ünïcode-42",
		"../../etc/shadow:SEKRET",
	}
	for _, key := range []string{"tokenFile", "caFile"} {
		for _, secret := range slices.Concat(tokenShaped, others) {
			q := strconv.Quote(secret)
			for form, file := range map[string]string{
				key:                  "url: https://xoa.example.com\n" + key + ": " + q + "\n",
				"clusters[0]." + key: "clusters:\n- {url: https://a.example.com, " + key + ": " + q + "}\n",
				"clusters[1]." + key: "clusters:\n- {url: https://a.example.com, tokenFile: /nonexistent}\n- {url: https://b.example.com, " + key + ": " + q + "}\n",
			} {
				_, err := loadString(t, file, nil)
				if err == nil {
					t.Fatalf("%s: %q loaded", form, secret)
				}
				msg := err.Error()
				if strings.Contains(msg, secret) || strings.Contains(msg, q[1:len(q)-1]) {
					t.Errorf("%s: the error shows the value: %v", form, err)
				}
				if !strings.Contains(msg, form+": Invalid value") || !strings.Contains(msg, "want the path of a file holding") {
					t.Errorf("%s: the error does not name the key and what it expects: %v", form, err)
				}
			}
		}
	}
	for _, key := range []string{"name", "url", "region", "caBundle", "topology.region", "topology.zone", "nodes.ignoreSelector"} {
		for _, secret := range tokenShaped {
			yamlKey := key
			if k, sub, nested := strings.Cut(key, "."); nested {
				yamlKey = k + ": {" + sub
			}
			file := "url: https://xoa.example.com\n" + yamlKey + ": " + strconv.Quote(secret)
			if strings.Contains(key, ".") {
				file += "}"
			}
			if key == "url" {
				file = "url: " + strconv.Quote(secret)
			}
			for _, f := range []string{file + "\n", file + "\nlabels: {tagLabelPrefixes: [" + strconv.Quote(secret) + "]}\naddresses: {internalCIDRs: [" + strconv.Quote(secret) + "]}\n" + strconv.Quote(secret) + ": 1\n"} {
				_, err := loadString(t, f, nil)
				if err == nil {
					t.Fatalf("%q loaded", f)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("%s: the error shows the token-shaped value: %v", key, err)
				}
			}
		}
	}
}

// TestAliasExpansion checks that aliases cannot make a small file expand without bound, nor
// its problems make an endless message.
func TestAliasExpansion(t *testing.T) {
	var b strings.Builder
	b.WriteString("labels: {tagLabelPrefixes: &p [a.example.com/")
	b.WriteString(strings.Repeat(", a.example.com/", 3000))
	b.WriteString("]}\nclusters: [{pools: *p}")
	b.WriteString(strings.Repeat(", {pools: *p}", 2000)) // 6 million pools, 66 KB
	b.WriteString("]\n")
	start := time.Now()
	_, err := loadString(t, b.String(), nil)
	if err == nil {
		t.Fatal("Load succeeded")
	}
	probs := problemsOf(t, err)
	if len(probs) != maxProblems+1 || !strings.Contains(probs[0].Error(), "more than 10000 keys and values") ||
		!strings.Contains(probs[maxProblems].Error(), "more problems not listed") {
		t.Errorf("Load = %.500v..., want the expansion refused and the problems cut", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Load took %v", d)
	}
}

func TestEffective(t *testing.T) {
	c, err := loadString(t, base+"pools: [prod]\ninventory: {settleTime: 1m}\nnodes: {ignoreSelector: role=infra}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Effective()
	if err != nil {
		t.Fatalf("Effective: %v", err)
	}
	if strings.Contains(string(out), testToken) {
		t.Fatalf("Effective leaks the token:\n%s", out)
	}
	var got map[string]any
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatalf("Effective is not YAML: %v\n%s", err, out)
	}
	cl := got["clusters"].([]any)[0].(map[string]any)
	inv := got["inventory"].(map[string]any)
	if cl["token"] != Redacted || cl["name"] != "xoa.example.com" || cl["requestTimeout"] != "10s" ||
		inv["settleTime"] != "1m0s" || got["nodes"].(map[string]any)["ignoreSelector"] != "role=infra" ||
		got["topology"].(map[string]any)["region"] != RegionPoolID {
		t.Errorf("Effective =\n%s", out)
	}
}

// TestKubernetesStrictDecodingFallsShort keeps the reason for config's own key walk (see
// decoder) checked: it gives the Kubernetes libraries' strict decoding, sigs.k8s.io/yaml's
// YAML-to-JSON conversion and then sigs.k8s.io/json.UnmarshalStrict, the example in decoder's
// comment and expects what that comment quotes. If it fails, a library has changed how it
// reports: see whether it now lists every problem by path, and whether the walk can go.
func TestKubernetesStrictDecodingFallsShort(t *testing.T) {
	const example = `clusters:
- url: https://xo
  tokne: ` + testToken + `
  insecure: "yes"
  requestTimeout: 5
- url: https://xo2
  url: https://xo3
  requestTimeout: soon
`
	// What they do well: every unknown key, by its path, when nothing else is wrong.
	strict, err := kjson.UnmarshalStrict([]byte(`{"clusters": [{"url": "https://xo", "tokne": "x"}, {"pasword": "y"}], "inventori": {}}`), &file{})
	var paths []string
	for _, e := range strict {
		paths = append(paths, e.(kjson.FieldError).FieldPath())
	}
	if err != nil || !slices.Equal(paths, []string{"clusters[0].tokne", "clusters[1].pasword", "inventori"}) {
		t.Errorf("unknown keys only: %v, %v", paths, err)
	}

	// A key given twice ends sigs.k8s.io/yaml's strict conversion: nothing else is reported.
	_, err = yaml.YAMLToJSONStrict([]byte(example))
	if want := "yaml: unmarshal errors:\n  line 7: key \"url\" already set in map"; err == nil || err.Error() != want {
		t.Errorf("YAMLToJSONStrict: %v, was %q", err, want)
	}
	// Its lenient conversion keeps the last url; then sigs.k8s.io/json reports the first ill-typed
	// value only, at a Go path without the list index, and drops the unknown key it found.
	j, err := yaml.YAMLToJSON([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	strict, err = kjson.UnmarshalStrict(j, &file{})
	const first = "json: cannot unmarshal string into Go struct field Cluster.Config.clusters.insecure of type bool"
	if len(strict) != 0 || err == nil || err.Error() != first {
		t.Errorf("UnmarshalStrict: %v, %v, was no strict error and %q", strict, err, first)
	}

	// YAML 1.1, which sigs.k8s.io/yaml speaks, rewrites what looks like a number or a boolean
	// even for a string key: the pool "010" becomes "8", the region "no" becomes "false", the
	// token 0123456 becomes 42798; and insecure: yes is true.
	var c Cluster
	if err := yaml.Unmarshal([]byte("pools: [\"010\", 010]\nregion: no\ntoken: 0123456\ninsecure: yes\n"), &c); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Pools, []string{"010", "8"}) || c.Region != "false" || c.Token.Reveal() != "42798" || !c.Insecure {
		t.Errorf("sigs.k8s.io/yaml no longer rewrites YAML 1.1 scalars: %+v: revisit decoder", c)
	}
}
