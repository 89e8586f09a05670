package xosim

import (
	"encoding/json"
	"math"
	"os"
	"reflect"
	"testing"
)

// TestPickGolden checks collection entries against lodash's pick, as XO builds them (see
// testdata/gen-lodash-pick.js): same keys, same values, same key order.
func TestPickGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/lodash-pick.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Object map[string]any `json:"object"`
		Cases  []struct {
			Fields string `json:"fields"`
			Result string `json:"result"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 40 {
		t.Fatalf("only %d cases", len(g.Cases))
	}
	for _, c := range g.Cases {
		obj := pick(g.Object, parseFields(c.Fields))
		obj.set("href", "/rest/v0/vms/vm1")
		got := string(appendJSON(nil, obj))
		if got != c.Result {
			t.Errorf("fields=%q: got %s, lodash gives %s", c.Fields, got, c.Result)
		}
	}
}

func TestStringToPath(t *testing.T) {
	// Expected values are lodash 4's toPath.
	tests := []struct {
		in   string
		want []string
	}{
		{"a.b", []string{"a", "b"}},
		{"a[0].b", []string{"a", "0", "b"}},
		{`a["x.y"]`, []string{"a", "x.y"}},
		{`a['q\'s']`, []string{"a", "q's"}},
		{"a..b", []string{"a", "", "b"}},
		{".a", []string{"", "a"}},
		{"a.", []string{"a", ""}},
		{"a[]", []string{"a", ""}},
		{"[]", []string{""}},
		{"..", []string{"", "", ""}},
		{"a[]]", []string{"a"}},
		{"a.[]", []string{"a", "", ""}},
		{"a[].b", []string{"a", "", "b"}},
		{"a[-1]", []string{"a", "-1"}},
		{"a[1.5]", []string{"a", "1.5"}},
		{"a[x]", []string{"a", "x"}},
	}
	for _, tt := range tests {
		if got := stringToPath(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("stringToPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPickDoesNotModifyStore(t *testing.T) {
	obj := map[string]any{"CPUs": map[string]any{"max": 4.0, "number": 2.0}}
	before := string(appendJSON(nil, obj))
	_ = pick(obj, []string{"CPUs", "CPUs.max", "CPUs.max.x", "CPUs.number"})
	if after := string(appendJSON(nil, obj)); after != before {
		t.Errorf("pick changed the object: %s -> %s", before, after)
	}
}

func TestAppendJSONMatchesJavaScript(t *testing.T) {
	tests := []struct {
		v    any
		want string
	}{
		{8589934592.0, "8589934592"},
		{1e21, "1e+21"},
		{1e-7, "1e-7"},
		{0.1, "0.1"},
		{math.Copysign(0, -1), "0"},
		{"<a&b>", `"<a&b>"`},
		{"tab\tnl\nq\"bs\\", `"tab\tnl\nq\"bs\\"`},
		{"\x01", `"\u0001"`},
		{"\xff", `"` + "\ufffd" + `"`},
		{map[string]any{"b": 1.0, "a": []any{}}, `{"a":[],"b":1}`},
		{kv("z", 1.0, "a", undefined, "m", nil), `{"z":1,"m":null}`},
	}
	for _, tt := range tests {
		if got := string(appendJSON(nil, tt.v)); got != tt.want {
			t.Errorf("appendJSON(%#v) = %s, want %s", tt.v, got, tt.want)
		}
	}
	if got := string(marshalPretty(kv("a", []any{}, "b", map[string]any{}, "c", []any{1.0}))); got != "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1\n  ]\n}" {
		t.Errorf("marshalPretty = %q", got)
	}
}
