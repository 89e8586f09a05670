package node

import (
	"encoding/hex"
	"strings"
	"testing"
)

func TestSwapUUID(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		// The pair from the xen-devel report: /sys/hypervisor/uuid vs product_uuid under OVMF.
		{"e865e63f-3d30-4f0b-83e0-0123456789ab", "3fe665e8-303d-0b4f-83e0-0123456789ab", true},
		{vmUUID, vmUUIDSwapped, true},
		{vmUUIDSwapped, vmUUID, true},
		{strings.ToUpper(vmUUID), vmUUIDSwapped, true},
		{"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000", true},
		{"", "", false},
		{"3f1c2b7e0c4a4d2b9e516a0f2e8b1c11", "", false},
		{"3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c1", "", false},
		{"3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c111", "", false},
		{"3f1c2b7g-0c4a-4d2b-9e51-6a0f2e8b1c11", "", false},
		{"3f1c2b7e_0c4a-4d2b-9e51-6a0f2e8b1c11", "", false},
		{"{3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c1}", "", false},
		{"3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c1\u00e9", "", false},
	}
	for _, tt := range tests {
		got, ok := SwapUUID(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("SwapUUID(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestNormalizeUUID(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{vmUUID, vmUUID, true},
		{strings.ToUpper(vmUUID), vmUUID, true},
		{"3F1c2B7e-0C4a-4d2b-9e51-6a0f2e8b1c11", vmUUID, true},
		{"", "", false},
		{"not-a-uuid", "", false},
		{" " + vmUUID, "", false},
	}
	for _, tt := range tests {
		got, ok := NormalizeUUID(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("NormalizeUUID(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { NormalizeUUID(vmUUID) }); n != 0 {
		t.Errorf("NormalizeUUID of a lower-case uuid allocates %v times", n)
	}
}

// refSwap is an independent implementation: decode the 16 bytes, reverse the first three
// fields, re-encode.
func refSwap(s string) (string, bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return "", false
	}
	raw, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(raw) != 16 {
		return "", false
	}
	rev := func(b []byte) {
		for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
			b[i], b[j] = b[j], b[i]
		}
	}
	rev(raw[0:4])
	rev(raw[4:6])
	rev(raw[6:8])
	h := hex.EncodeToString(raw)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], true
}

func FuzzSwapUUID(f *testing.F) {
	for _, s := range []string{vmUUID, strings.ToUpper(vmUUIDSwapped), "", "x", "3f1c2b7e-0c4a-4d2b-9e51-6a0f2e8b1c1+"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := SwapUUID(s)
		want, wantOK := refSwap(s)
		if ok != wantOK || got != want {
			t.Fatalf("SwapUUID(%q) = %q, %v; reference %q, %v", s, got, ok, want, wantOK)
		}
		if ok {
			back, _ := SwapUUID(got)
			norm, _ := NormalizeUUID(s)
			if back != norm {
				t.Fatalf("SwapUUID is not an involution on %q: %q", s, back)
			}
		}
	})
}
