package xosim

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// goldenCase is one case of testdata/complex-matcher.golden.json, produced by XO's own
// complex-matcher (see testdata/gen-complex-matcher.js).
type goldenCase struct {
	Filter     string `json:"filter"`
	Error      string `json:"error"`
	Matches    []bool `json:"matches"`
	MatchError string `json:"matchError"`
}

func loadGolden(t testing.TB) ([]any, []goldenCase) {
	t.Helper()
	data, err := os.ReadFile("testdata/complex-matcher.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Objects []any        `json:"objects"`
		Cases   []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 500 {
		t.Fatalf("golden file has only %d cases", len(g.Cases))
	}
	return g.Objects, g.Cases
}

// TestFilterGolden checks the parser and the matcher against XO's implementation, case by
// case: same parse errors (message and position), same matches.
func TestFilterGolden(t *testing.T) {
	objects, cases := loadGolden(t)
	for _, c := range cases {
		m, err := ParseFilter(c.Filter)
		switch {
		case c.Error != "":
			if err == nil {
				t.Errorf("ParseFilter(%q): no error, XO says %q", c.Filter, c.Error)
				continue
			}
			// JavaScript and Go regexp engines word their syntax errors differently.
			if strings.HasPrefix(c.Error, "Invalid regular expression") {
				if !strings.HasPrefix(err.Error(), "Invalid regular expression: ") {
					t.Errorf("ParseFilter(%q) = %q, want an invalid regular expression error", c.Filter, err)
				}
				continue
			}
			if err.Error() != c.Error {
				t.Errorf("ParseFilter(%q) = %q, XO says %q", c.Filter, err, c.Error)
			}
		case err != nil:
			t.Errorf("ParseFilter(%q): %v, XO parses it", c.Filter, err)
		default:
			for i, o := range objects {
				got, err := m.Match(o)
				if err != nil {
					t.Errorf("Match(%q, object %d): %v", c.Filter, i, err)
					continue
				}
				if got != c.Matches[i] {
					t.Errorf("Match(%q, object %d) = %v, XO says %v", c.Filter, i, got, c.Matches[i])
				}
			}
		}
	}
}

var testVM = map[string]any{
	"type":         "VM",
	"id":           "3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c11",
	"name_label":   "k8s-worker-1",
	"power_state":  "Running",
	"tags":         []any{"k8s", "cluster=prod", "web"},
	"CPUs":         map[string]any{"max": 4.0, "number": 2.0},
	"memory":       map[string]any{"size": 8589934592.0, "dynamic": []any{1073741824.0, 8589934592.0}},
	"addresses":    map[string]any{"0/ipv4/0": "10.0.12.41", "0/ipv6/0": "fd00::11"},
	"VIFs":         []any{"a", "b"},
	"os_version":   nil,
	"boot":         map[string]any{"firmware": "uefi"},
	"$pool":        "5e0b1a6c-8f2d-4c39-a1e7-0d9b3c4f2a10",
	"$container":   "b61a5c92-700e-4966-a13b-00633f03eea8",
	"auto_poweron": false,
	"startTime":    1760000000.0,
}

// TestFilterMatch covers each construct of the reference (§1.6, §10) on a VM object.
func TestFilterMatch(t *testing.T) {
	tests := []struct {
		filter string
		want   bool
	}{
		{"", true},
		{"power_state:running", true},
		{"power_state:RUN", true},
		{"power_state:halted", false},
		{"tags:prod", true},
		{"tags:/^web$/", true},
		{"tags:/^we$/", false},
		{`tags:"cluster=prod"`, true},
		{"name_label:k8s-*", true},
		{"name_label:*-1", true},
		{"name_label:*-2", false},
		{"name_label:/^k8s-worker-1$/", true},
		{"name_label:/^K8S/", false},
		{"name_label:/^K8S/i", true},
		{"power_state:Running $pool:5e0b1a6c", true},
		{"power_state:Running $pool:7c3f", false},
		{"!power_state:Running", false},
		{"power_state:|(Halted Paused)", false},
		{"power_state:|(Halted Running)", true},
		{"|(tags:nope name_label:k8s)", true},
		{"(tags:k8s tags:web)", true},
		{"(tags:k8s tags:nope)", false},
		{"CPUs:max:>=4", true},
		{"CPUs:max:>4", false},
		{"CPUs:number:<=2", true},
		{"CPUs:number:2", true},
		{"CPUs:number:3", false},
		{"VIFs:length:>=2", true},
		{"memory:dynamic:1:>=8589934592", true},
		{"boot:firmware:uefi", true},
		{"startTime?", true},
		{"os_version?", false},
		{"auto_poweron?", false},
		{"unknown:x", false},
		{"unknown?", false},
		{"!unknown:x", true},
		{`addresses:"fd00::11"`, true},
		{"addresses:10.0.12", true},
		{"$container:b61a5c92", true},
		{"id:3F1C2B7E", true},
		// Unquoted spaces separate terms: this is name_label:k8s AND "web" anywhere.
		{"name_label:k8s web", true},
		{"name_label:k8s nope", false},
	}
	for _, tt := range tests {
		m, err := ParseFilter(tt.filter)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", tt.filter, err)
			continue
		}
		got, err := m.Match(testVM)
		if err != nil || got != tt.want {
			t.Errorf("Match(%q) = %v, %v; want %v", tt.filter, got, err, tt.want)
		}
	}
}

func TestFilterErrors(t *testing.T) {
	tests := []struct {
		filter, want string
	}{
		{"name_label:(", "parse error: expected end of input at position 10"},
		{"tags:backup=daily", "parse error: expected end of input at position 11"},
		{"addresses:fd00::11", "parse error: expected end of input at position 14"},
		{"name_label:my vm:", "parse error: expected end of input at position 16"},
		{"(a", "parse error: expected end of input at position 0"},
		{"a)", "parse error: expected end of input at position 1"},
		{"CPUs:max:=4", "parse error: expected end of input at position 8"},
		{"CPUs:max:>x", "value must be a number"},
		// Positions count UTF-16 code units, as in JavaScript: "😀" is two.
		{"😀 a:(", "parse error: expected end of input at position 0"},
		{"a 😀", "parse error: expected end of input at position 2"},
		{"é b:(", "parse error: expected end of input at position 3"},
		{strings.Repeat("(", maxFilterDepth+1) + "a" + strings.Repeat(")", maxFilterDepth+1), "Maximum call stack size exceeded"},
	}
	for _, tt := range tests {
		_, err := ParseFilter(tt.filter)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParseFilter(%.40q) = %v, want %q", tt.filter, err, tt.want)
		}
		if _, ok := err.(*FilterError); err != nil && !ok {
			t.Errorf("ParseFilter(%.40q): error type %T, want *FilterError", tt.filter, err)
		}
	}
	// Deep but allowed nesting parses.
	deep := strings.Repeat("(", 200) + "a" + strings.Repeat(")", 200)
	if _, err := ParseFilter(deep); err != nil {
		t.Errorf("200 nested groups: %v", err)
	}
}

func TestFilterResolve(t *testing.T) {
	m, err := ParseFilter("objects:[resolve]:tags:tag")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Match(map[string]any{"objects": "x"}); err == nil || err.Error() != "[resolve] requires a resolver" {
		t.Errorf("Match: %v, want the resolver error", err)
	}
	m, err = ParseFilter("[resolve:all]:x")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := m.Match(map[string]any{}); ok || err == nil {
		t.Errorf("Match = %v, %v; want false and an error", ok, err)
	}
}

func TestJSRegexpTranslation(t *testing.T) {
	tests := []struct {
		pattern, flags, subject string
		want                    bool
		wantErr                 bool
	}{
		{`^k8s`, "", "k8s-1", true, false},
		{`\d+`, "", "a12", true, false},
		{`\bweb\b`, "", "a web b", true, false},
		{`[\b]`, "", "\b", true, false},
		{`\u006b`, "", "k", true, false},
		{`\x6b`, "", "k", true, false},
		{`\cJ`, "", "\n", true, false},
		{`\a`, "", "a", true, false}, // identity escape in JavaScript
		{`\/`, "", "/", true, false},
		{`[^]`, "", "\n", true, false},
		{`[]`, "", "anything", false, false},
		{`a{2`, "", "a{2", true, false},
		{`ABC`, "i", "xabcx", true, false},
		{`(?=a)`, "", "", false, true},
		{`(?<!a)b`, "", "", false, true},
		{`(a)\1`, "", "", false, true},
		{`(`, "", "", false, true},
		{`\`, "", "", false, true},
	}
	for _, tt := range tests {
		re, err := compileJSRegexp(tt.pattern, tt.flags)
		if (err != nil) != tt.wantErr {
			t.Errorf("compileJSRegexp(%q): err %v, wantErr %v", tt.pattern, err, tt.wantErr)
			continue
		}
		if err == nil && re.MatchString(tt.subject) != tt.want {
			t.Errorf("/%s/%s on %q = %v, want %v", tt.pattern, tt.flags, tt.subject, !tt.want, tt.want)
		}
	}
}

func TestJSStringToNumber(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"", 0}, {"  ", 0}, {"42", 42}, {"-3", -3}, {"+3", 3}, {"1.", 1}, {".5", 0.5}, {"1e3", 1000},
		{"1E-2", 0.01}, {"0x1F", 31}, {"0b101", 5}, {"0o17", 15}, {"Infinity", math.Inf(1)},
		{"-Infinity", math.Inf(-1)}, {" 7 ", 7}, {"007", 7},
		{"-0x10", math.NaN()}, {"1_000", math.NaN()}, {"abc", math.NaN()}, {".", math.NaN()},
		{"1e", math.NaN()}, {"infinity", math.NaN()}, {"0x", math.NaN()}, {"0xG", math.NaN()},
	}
	for _, tt := range tests {
		got := jsStringToNumber(tt.in)
		if math.IsNaN(tt.want) != math.IsNaN(got) || (!math.IsNaN(got) && got != tt.want) {
			t.Errorf("jsStringToNumber(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if got := jsToNumber([]any{5.0}); got != 5 {
		t.Errorf("jsToNumber([5]) = %v", got)
	}
	if got := jsToNumber([]any{}); got != 0 {
		t.Errorf("jsToNumber([]) = %v", got)
	}
	if got := jsToNumber(map[string]any{}); !math.IsNaN(got) {
		t.Errorf("jsToNumber({}) = %v", got)
	}
}

// FuzzParseFilter checks that no filter makes the parser or the matcher panic or hang, and
// that errors are XO-shaped.
func FuzzParseFilter(f *testing.F) {
	_, cases := loadGolden(f)
	for _, c := range cases {
		f.Add(c.Filter)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseFilter(s)
		if err != nil {
			fe, ok := err.(*FilterError)
			if !ok || fe.Message == "" {
				t.Fatalf("ParseFilter(%q): %T %v", s, err, err)
			}
			return
		}
		if _, err := m.Match(testVM); err != nil && !strings.Contains(s, "[resolve") {
			t.Fatalf("Match(%q): %v", s, err)
		}
		if utf8.ValidString(s) && m.String() != s {
			t.Fatalf("String() = %q, want %q", m.String(), s)
		}
	})
}
