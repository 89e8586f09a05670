package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
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

// problemsOf returns "path: message" for each problem of err, failing if err is no Errors.
func problemsOf(t *testing.T, err error) []string {
	t.Helper()
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v (%T) does not wrap Errors", err, err)
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

func pathsOf(t *testing.T, err error) []string {
	t.Helper()
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v (%T) does not wrap Errors", err, err)
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Path
	}
	return out
}

func TestLoadMinimalAppliesDefaults(t *testing.T) {
	got, err := loadString(t, base, nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Default()
	want.URL = "https://xoa.example.com"
	want.Token = testToken
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load = %+v\nwant %+v", got, want)
	}
}

func TestLoadExample(t *testing.T) {
	got, err := Load("testdata/example.yaml", nil)
	if err != nil {
		t.Fatalf("Load(example): %v", err)
	}
	want := Default()
	want.URL = "https://xoa.example.com"
	want.Token = "example-token-0123456789abcdefghijklmnopqrstuvw"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("example = %+v\nwant defaults %+v", got, want)
	}

	// The example documents every key, commented out or not.
	raw, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, list := range [][]string{topKeys, inventoryKeys, labelsKeys, addressesKeys, lifecycleKeys} {
		keys = append(keys, list...)
	}
	for _, k := range keys {
		if k == "username" || k == "password" {
			continue // rejected keys, explained in the header
		}
		if !regexp.MustCompile(`(?m)^[#\s]*` + k + `:`).Match(raw) {
			t.Errorf("example.yaml does not document %s", k)
		}
	}
}

func TestLoadJSONFile(t *testing.T) {
	got, err := loadString(t, `{"url": "https://xo.example.com/", "token": "`+testToken+`", "inventory": {"pollPeriod": "5s"}}`, nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got.URL != "https://xo.example.com" || got.Inventory.PollPeriod != 5*time.Second {
		t.Errorf("got %+v", got)
	}
}

func TestLoadEnvOnly(t *testing.T) {
	got, err := Load("", envOf(EnvURL, "https://xoa.example.com/", EnvToken, testToken+"\n", EnvInsecure, "true"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got.URL != "https://xoa.example.com" || got.Token.Reveal() != testToken || !got.Insecure {
		t.Errorf("got url=%q token-ok=%v insecure=%v", got.URL, got.Token.Reveal() == testToken, got.Insecure)
	}
	_, err = Load("", nil)
	if got := pathsOf(t, err); !slices.Equal(got, []string{"url", "token"}) {
		t.Errorf("empty environment: problems at %v, want [url token]", got)
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
			name:         "ill-typed file key is not filled from env",
			file:         "url: 5\ntoken: " + testToken + "\n",
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadString(t, tt.file, tt.env)
			if tt.wantErrPaths != nil {
				if err == nil {
					t.Fatalf("Load succeeded, want problems at %v", tt.wantErrPaths)
				}
				if paths := pathsOf(t, err); !slices.Equal(paths, tt.wantErrPaths) {
					t.Errorf("problems %q, want paths %v", problemsOf(t, err), tt.wantErrPaths)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got.URL != tt.wantURL || got.Token.Reveal() != tt.wantToken || got.Insecure != tt.wantInsecure {
				t.Errorf("url=%q insecure=%v token-is-%s", got.URL, got.Insecure, whichToken(got.Token, envToken))
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
					t.Errorf("problems %q, want paths %v", problemsOf(t, err), tt.wantErrPaths)
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
			if got.Token.Reveal() != testToken {
				t.Errorf("token not read from the file (trimmed)")
			}
			if got.TokenFile != abs {
				t.Errorf("TokenFile = %q, want %q", got.TokenFile, abs)
			}
		})
	}
}

// TestKeyValidation checks each key: a valid value loads (and is normalised as wanted), an
// invalid one is reported under the key's path with a telling message.
func TestKeyValidation(t *testing.T) {
	tests := []struct {
		name    string
		extra   string // appended to a file with url and token (url: below overrides)
		check   func(*Config) bool
		path    string // "" when valid
		wantMsg string
	}{
		// url
		{"url trailing slash", "url: https://xoa.example.com///\n", func(c *Config) bool { return c.URL == "https://xoa.example.com" }, "", ""},
		{"url base path", "url: HTTPS://proxy.example.com/xo/\n", func(c *Config) bool { return c.URL == "https://proxy.example.com/xo" }, "", ""},
		{"url http and port", "url: http://10.0.0.1:8080\n", func(c *Config) bool { return c.URL == "http://10.0.0.1:8080" }, "", ""},
		{"url ipv6", "url: https://[fd00::1]:443/\n", func(c *Config) bool { return c.URL == "https://[fd00::1]:443" }, "", ""},
		{"url scheme", "url: ftp://xoa.example.com\n", nil, "url", `scheme "ftp"`},
		{"url ws scheme", "url: wss://xoa.example.com\n", nil, "url", "want http or https"},
		{"url no scheme", "url: xoa.example.com\n", nil, "url", "must start with http"},
		{"url host:port no scheme", "url: xoa.example.com:443\n", nil, "url", "must start with http"},
		{"url credentials", "url: https://admin:hunter22@xoa.example.com\n", nil, "url", "credentials"},
		{"url no host", "url: https:///path\n", nil, "url", "no host"},
		{"url bad port", "url: https://xoa.example.com:99999\n", nil, "url", "port"},
		{"url query", "url: https://xoa.example.com/?a=b\n", nil, "url", "query"},
		{"url fragment", "url: https://xoa.example.com/#x\n", nil, "url", "fragment"},
		{"url rest path", "url: https://xoa.example.com/rest/v0\n", nil, "url", "without /rest/v0"},
		{"url unparsable", "url: \"https://xo a.example.com\"\n", nil, "url", "not a valid URL"},
		{"url type", "url: [a]\n", nil, "url", "must be a string, not a list"},
		// insecure
		{"insecure true", "insecure: true\n", func(c *Config) bool { return c.Insecure }, "", ""},
		{"insecure string", "insecure: \"maybe\"\n", nil, "insecure", "must be true or false, not a string"},
		{"insecure number", "insecure: 1\n", nil, "insecure", "must be true or false, not a number"},
		// token
		{"token number", "token: 12345\n", nil, "token", "quote the value"},
		{"token space", "token: \"a b c d\"\n", nil, "token", "cookie"},
		{"token semicolon", "token: \"abc;def\"\n", nil, "token", "cookie"},
		{"token non-ascii", "token: \"abcdé\"\n", nil, "token", "cookie"},
		{"token too long", "token: " + strings.Repeat("a", 5000) + "\n", nil, "token", "longer than"},
		// requestTimeout
		{"requestTimeout", "requestTimeout: 1m30s\n", func(c *Config) bool { return c.RequestTimeout == 90*time.Second }, "", ""},
		{"requestTimeout min", "requestTimeout: 1s\n", func(c *Config) bool { return c.RequestTimeout == time.Second }, "", ""},
		{"requestTimeout max", "requestTimeout: 5m\n", func(c *Config) bool { return c.RequestTimeout == 5*time.Minute }, "", ""},
		{"requestTimeout too short", "requestTimeout: 999ms\n", nil, "requestTimeout", "must be at least 1s"},
		{"requestTimeout too long", "requestTimeout: 5m1s\n", nil, "requestTimeout", "must be at most 5m"},
		{"requestTimeout zero", "requestTimeout: 0s\n", nil, "requestTimeout", "at least 1s"},
		{"requestTimeout negative", "requestTimeout: -5s\n", nil, "requestTimeout", "at least 1s"},
		{"requestTimeout bad", "requestTimeout: 30x\n", nil, "requestTimeout", `"30x" is not a duration`},
		{"requestTimeout number", "requestTimeout: 30\n", nil, "requestTimeout", "duration string"},
		// inventory
		{"resyncPeriod", "inventory: {resyncPeriod: 1h}\n", func(c *Config) bool { return c.Inventory.ResyncPeriod == time.Hour }, "", ""},
		{"resyncPeriod too short", "inventory: {resyncPeriod: 10s}\n", nil, "inventory.resyncPeriod", "at least 30s"},
		{"resyncPeriod too long", "inventory: {resyncPeriod: 25h}\n", nil, "inventory.resyncPeriod", "at most 24h"},
		{"pollPeriod", "inventory: {pollPeriod: 1s, staleAfter: 2s}\n", func(c *Config) bool {
			return c.Inventory.PollPeriod == time.Second && c.Inventory.StaleAfter == 2*time.Second
		}, "", ""},
		{"pollPeriod too short", "inventory: {pollPeriod: 500ms}\n", nil, "inventory.pollPeriod", "must be at least 1s"},
		{"pollPeriod too long", "inventory: {pollPeriod: 2h, staleAfter: 3h}\n", nil, "inventory.pollPeriod", "at most 1h"},
		{"staleAfter equal pollPeriod", "inventory: {pollPeriod: 1m, staleAfter: 1m}\n", nil, "inventory.staleAfter", "greater than inventory.pollPeriod (1m)"},
		{"staleAfter below default pollPeriod", "inventory: {staleAfter: 10s}\n", nil, "inventory.staleAfter", "greater than inventory.pollPeriod (30s)"},
		{"staleAfter too long", "inventory: {staleAfter: 48h}\n", nil, "inventory.staleAfter", "at most 24h"},
		{"inventory not a map", "inventory: 5m\n", nil, "inventory", "must be a mapping"},
		{"inventory null keeps defaults", "inventory: null\n", func(c *Config) bool { return c.Inventory == Default().Inventory }, "", ""},
		// labels
		{"prefixes", "labels: {tagLabelPrefixes: [example.com/, team.example.com/xo-], tagTaintPrefixes: []}\n", func(c *Config) bool {
			return slices.Equal(c.Labels.TagLabelPrefixes, []string{"example.com/", "team.example.com/xo-"}) &&
				c.Labels.TagTaintPrefixes != nil && len(c.Labels.TagTaintPrefixes) == 0
		}, "", ""},
		{"prefix reserved", "labels: {tagLabelPrefixes: [example.com/, kubernetes.io/]}\n", nil, "labels.tagLabelPrefixes[1]", `"kubernetes.io/" is reserved`},
		{"prefix reserved k8s.io", "labels: {tagLabelPrefixes: [k8s.io/]}\n", nil, "labels.tagLabelPrefixes[0]", "reserved"},
		{"prefix reserved node-role", "labels: {tagLabelPrefixes: [node-role.kubernetes.io/]}\n", nil, "labels.tagLabelPrefixes[0]", "reserved"},
		{"prefix reserved node-restriction", "labels: {tagTaintPrefixes: [node-restriction.kubernetes.io/]}\n", nil, "labels.tagTaintPrefixes[0]", "reserved"},
		{"prefix reserved sub k8s.io", "labels: {tagTaintPrefixes: [a.b.k8s.io/x]}\n", nil, "labels.tagTaintPrefixes[0]", "reserved"},
		{"prefix lookalike allowed", "labels: {tagLabelPrefixes: [notkubernetes.io/, k8s.io.example.com/]}\n", func(c *Config) bool {
			return len(c.Labels.TagLabelPrefixes) == 2
		}, "", ""},
		{"prefix without slash", "labels: {tagLabelPrefixes: [node]}\n", nil, "labels.tagLabelPrefixes[0]", `followed by "/"`},
		{"prefix upper case domain", "labels: {tagLabelPrefixes: [Example.com/]}\n", nil, "labels.tagLabelPrefixes[0]", "DNS subdomain"},
		{"prefix empty domain", "labels: {tagLabelPrefixes: [/x]}\n", nil, "labels.tagLabelPrefixes[0]", "DNS subdomain"},
		{"prefix bad name start", "labels: {tagLabelPrefixes: [example.com/-x]}\n", nil, "labels.tagLabelPrefixes[0]", "start with"},
		{"prefix bad name char", "labels: {tagLabelPrefixes: [example.com/a/b]}\n", nil, "labels.tagLabelPrefixes[0]", "may hold only"},
		{"prefix name too long", "labels: {tagLabelPrefixes: [example.com/" + strings.Repeat("a", 63) + "]}\n", nil, "labels.tagLabelPrefixes[0]", "at most 62"},
		{"prefix not a string", "labels: {tagLabelPrefixes: [example.com/, 5]}\n", nil, "labels.tagLabelPrefixes[1]", "must be a string"},
		{"prefixes not a list", "labels: {tagLabelPrefixes: example.com/}\n", nil, "labels.tagLabelPrefixes", "must be a list"},
		// addresses
		{"cidrs", "addresses: {internalCIDRs: [10.0.0.0/8, \"fd00::/8\"], externalCIDRs: [203.0.113.0/24]}\n", func(c *Config) bool {
			return len(c.Addresses.InternalPrefixes()) == 2 && c.Addresses.ExternalPrefixes()[0].String() == "203.0.113.0/24"
		}, "", ""},
		{"cidr host bits", "addresses: {internalCIDRs: [10.0.0.1/8]}\n", nil, "addresses.internalCIDRs[0]", `did you mean "10.0.0.0/8"`},
		{"cidr bad", "addresses: {externalCIDRs: [\"fd00::/8\", 10.0.0.0]}\n", nil, "addresses.externalCIDRs[1]", `"10.0.0.0" is not a CIDR`},
		// lifecycle
		{"outOfServiceTaint", "lifecycle: {outOfServiceTaint: true}\n", func(c *Config) bool { return c.Lifecycle.OutOfServiceTaint }, "", ""},
		{"outOfServiceTaint type", "lifecycle: {outOfServiceTaint: \"yes\"}\n", nil, "lifecycle.outOfServiceTaint", "true or false"},
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
			// A later key wins in the file would be a duplicate: put the override first and
			// let base supply what the case does not.
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
			if len(probs) != 1 || !strings.HasPrefix(probs[0], tt.path+": ") || !strings.Contains(probs[0], tt.wantMsg) {
				t.Errorf("problems %q, want one at %s mentioning %q", probs, tt.path, tt.wantMsg)
			}
			if strings.Contains(err.Error(), testToken) {
				t.Errorf("error leaks the token: %v", err)
			}
		})
	}
}

func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"urll: x\n", []string{"urll: unknown key (did you mean url?)"}},
		{"Token: x\n", []string{"Token: unknown key (did you mean token?)"}},
		{"clientTimeout: 5s\n", []string{"clientTimeout: unknown key; use requestTimeout"}},
		{"zzz: 1\naaa: 2\n", []string{"aaa: unknown key", "zzz: unknown key"}},
		{"inventory: {resyncPeriodd: 1m}\n", []string{"inventory.resyncPeriodd: unknown key (did you mean resyncPeriod?)"}},
		{"labels: {tagPrefixes: []}\n", []string{"labels.tagPrefixes: unknown key"}},
		{"addresses: {internalCIDR: []}\n", []string{"addresses.internalCIDR: unknown key (did you mean internalCIDRs?)"}},
		{"lifecycle: {outOfService: true}\n", []string{"lifecycle.outOfService: unknown key"}},
		{"inventory: {a.b: 1, \"x y\": 2}\n", []string{`inventory."a.b": unknown key`, `inventory."x y": unknown key`}},
		{"1: x\n", []string{"1: unknown key"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := loadString(t, base+tt.file, nil)
			if got := problemsOf(t, err); !slices.Equal(got, tt.want) {
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
`
	_, err := loadString(t, file, nil)
	if err == nil {
		t.Fatal("Load succeeded")
	}
	// In the order of the schema; unknown keys after the known ones of their mapping.
	want := []string{"url", "insecure", "inventory.pollPeriod", "inventory.resyncPeriodd", "labels.tagLabelPrefixes[1]"}
	got := pathsOf(t, err)
	if !slices.Equal(got, want) {
		t.Errorf("problems at %q, want %q (all of: %v)", got, want, err)
	}
	for _, s := range []string{"5 problems", "must be at least 1s", `"kubernetes.io/" is reserved`, "unknown key"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if !strings.Contains(err.Error(), "config.yaml") {
		t.Errorf("error %q does not name the file", err)
	}
}

func TestYAMLErrors(t *testing.T) {
	tests := []struct {
		file    string
		wantMsg string
	}{
		{"url: [\n", "invalid YAML"},
		{"token: !!int " + testToken + "\n", "invalid YAML"},
		{"token: !!float " + testToken + "\n", "invalid YAML"},
		{"token: !!binary " + testToken + "$\n", "invalid YAML"},
		{"token: *" + testToken + "\n", "invalid YAML"},
		{"? [" + testToken + "]\n: 1\n", "invalid map key"},
		{"token: a\ntoken: b\n", `key "token" already set`},
		{"token: \"" + testToken + "\"\n  x: 1\n", "invalid YAML"},
		{"- url\n", "must be a mapping"},
		{testToken + "\n", "must be a mapping"},
		{"url: .inf\n", "invalid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := loadString(t, tt.file, nil)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q, want %q", err, tt.wantMsg)
			}
			if strings.Contains(err.Error(), testToken) {
				t.Errorf("error leaks the token: %v", err)
			}
			if got := pathsOf(t, err); !slices.Equal(got, []string{""}) {
				t.Errorf("problems at %q, want one about the whole file", got)
			}
		})
	}
}

// TestErrorsNeverHoldToken covers mistakes that put the token where a value is echoed.
func TestErrorsNeverHoldToken(t *testing.T) {
	files := []string{
		base + "requestTimeout: " + testToken + "\n",
		base + "addresses: {internalCIDRs: [" + testToken + "]}\n",
		base + "labels: {tagLabelPrefixes: [" + testToken + "]}\n",
		base + testToken + ": 1\n",
		"url: https://xoa.example.com\ntoken: " + testToken + "\ntokenFile: /x\n",
		"url: https://" + testToken + "@xoa.example.com\ntoken: " + testToken + "\n",
		"url: " + testToken + "\ntoken: " + testToken + "\n",
		"url: https://xoa.example.com\npassword: " + testToken + "\n",
		"url: https://xoa.example.com\ntoken: \"" + testToken + " \"\n",
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

func TestScanSecrets(t *testing.T) {
	data := []byte("url: x\ntoken: \"abc-secret\"  # comment\n  - password: 'pw-secret'\n{\"token\": \"json-secret\", \"a\": 1}\n")
	got := scanSecrets(data)
	for _, want := range []string{"abc-secret", "pw-secret", "json-secret"} {
		if !slices.Contains(got, want) {
			t.Errorf("scanSecrets = %q, missing %q", got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "abc", 0}, {"abc", "abd", 1}, {"resyncperiodd", "resyncperiod", 1}, {"kitten", "sitting", 3}} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
