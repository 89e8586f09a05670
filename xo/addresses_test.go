package xo

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestCompareAddressKey(t *testing.T) {
	keys := []string{"10/ipv4/0", "2/ipv6/0", "2/ipv4/10", "2/ipv4/2", "eth0/ipv4/0", "02/ipv4/0", "2/ipv4", "1/ipv4/0"}
	slices.SortFunc(keys, CompareAddressKey)
	want := []string{"1/ipv4/0", "02/ipv4/0", "2/ipv4", "2/ipv4/2", "2/ipv4/10", "2/ipv6/0", "10/ipv4/0", "eth0/ipv4/0"}
	if !slices.Equal(keys, want) {
		t.Fatalf("sorted = %q, want %q", keys, want)
	}
}

// TestAddressesJSON: XO's object decodes in key order and encodes back to the same object.
func TestAddressesJSON(t *testing.T) {
	var a Addresses
	in := `{"10/ipv4/0":"10.0.0.3","0/ipv6/0":"fd00::1","0/ipv4/0":"10.0.0.1"}`
	if err := json.Unmarshal([]byte(in), &a); err != nil {
		t.Fatal(err)
	}
	want := Addresses{{"0/ipv4/0", "10.0.0.1"}, {"0/ipv6/0", "fd00::1"}, {"10/ipv4/0", "10.0.0.3"}}
	if !slices.Equal(a, want) {
		t.Fatalf("decoded %v, want %v", a, want)
	}
	out, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"0/ipv4/0":"10.0.0.1","0/ipv6/0":"fd00::1","10/ipv4/0":"10.0.0.3"}` {
		t.Fatalf("encoded %s", out)
	}
	if err := json.Unmarshal([]byte(`null`), &a); err != nil || a != nil {
		t.Fatalf("null decoded to %v, %v", a, err)
	}
}
