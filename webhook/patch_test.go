package webhook

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzAppendString checks the patch's string encoding against encoding/json: the same string
// decodes back, and as a JSON pointer token it unescapes (RFC 6901) to the same string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "kubernetes.io/hostname", "a~b/c", "quote\" back\\ slash", "\n\r\t\x00\x1f\x7f", "é 🚀 \xff\xfe", "\u2028<>&"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var wantStr string
		if err := json.Unmarshal(want, &wantStr); err != nil {
			t.Fatal(err)
		}
		for _, pointer := range []bool{false, true} {
			got := appendString([]byte("x"), s, pointer)
			var gotStr string
			if err := json.Unmarshal(got[1:], &gotStr); err != nil || string(got[:1]) != "x" {
				t.Fatalf("appendString(%q, %t) = %q: %v", s, pointer, got, err)
			}
			if pointer {
				gotStr = strings.NewReplacer("~1", "/", "~0", "~").Replace(gotStr)
			}
			if gotStr != wantStr {
				t.Fatalf("appendString(%q, %t) decodes to %q, want %q", s, pointer, gotStr, wantStr)
			}
		}
	})
}
