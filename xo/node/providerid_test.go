package node

import (
	"errors"
	"strings"
	"testing"
)

func TestFormatProviderID(t *testing.T) {
	if got, want := FormatProviderID(strings.ToUpper(poolA), strings.ToUpper(vmUUID)), "xenorchestra://"+poolA+"/"+vmUUID; got != want {
		t.Fatalf("FormatProviderID = %q, want %q", got, want)
	}
	if got, want := FormatProviderID("", vmUUID), "xenorchestra:///"+vmUUID; got != want {
		t.Fatalf("FormatProviderID = %q, want %q", got, want)
	}
}

func TestParseProviderID(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		pool, vm string
		err      error
	}{
		{"ours", "xenorchestra://" + poolA + "/" + vmUUID, poolA, vmUUID, nil},
		{"upper-case uuids", "xenorchestra://" + strings.ToUpper(poolA) + "/" + strings.ToUpper(vmUUID), poolA, vmUUID, nil},
		{"upper-case scheme", "XenOrchestra://" + poolA + "/" + vmUUID, poolA, vmUUID, nil},
		{"legacy scheme", "xeorchestra://" + poolA + "/" + vmUUID, poolA, vmUUID, nil},
		{"empty pool", "xenorchestra:///" + vmUUID, "", vmUUID, nil},
		{"legacy empty pool", "xeorchestra:///" + vmUUID, "", vmUUID, nil},
		{"empty", "", "", "", ErrEmptyProviderID},
		{"aws", "aws:///us-east-1a/i-0abc", "", "", ErrNotOurs},
		{"openstack", "openstack:///" + vmUUID, "", "", ErrNotOurs},
		{"no scheme", "just-a-string", "", "", ErrNotOurs},
		{"scheme prefix of ours", "xenorchestrax://" + poolA + "/" + vmUUID, "", "", ErrNotOurs},
		{"single slash", "xenorchestra:/" + poolA + "/" + vmUUID, "", "", ErrMalformed},
		{"no slashes", "xenorchestra:" + vmUUID, "", "", ErrMalformed},
		{"scheme only", "xenorchestra://", "", "", ErrMalformed},
		{"no vm", "xenorchestra://" + poolA + "/", "", "", ErrMalformed},
		{"only vm", "xenorchestra://" + vmUUID, "", "", ErrMalformed},
		{"vm not a uuid", "xenorchestra://" + poolA + "/vm-1", "", "", ErrMalformed},
		{"pool not a uuid", "xenorchestra://pool/" + vmUUID, "", "", ErrMalformed},
		{"extra segment", "xenorchestra://" + poolA + "/" + vmUUID + "/x", "", "", ErrMalformed},
		{"trailing slash", "xenorchestra://" + poolA + "/" + vmUUID + "/", "", "", ErrMalformed},
		{"spaces", "xenorchestra://" + poolA + "/ " + vmUUID, "", "", ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, vm, err := ParseProviderID(tt.in)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("ParseProviderID(%q) error = %v, want %v", tt.in, err, tt.err)
			}
			if pool != tt.pool || vm != tt.vm {
				t.Fatalf("ParseProviderID(%q) = %q, %q; want %q, %q", tt.in, pool, vm, tt.pool, tt.vm)
			}
			var pe *ProviderIDError
			if err != nil && !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ProviderIDError", err)
			}
			if wantOurs := tt.err == nil || errors.Is(tt.err, ErrMalformed); IsOurs(tt.in) != wantOurs {
				t.Fatalf("IsOurs(%q) = %v, want %v", tt.in, !wantOurs, wantOurs)
			}
		})
	}
}

func TestProviderIDErrorIsBounded(t *testing.T) {
	long := "xenorchestra://" + strings.Repeat("a", 10000)
	_, _, err := ParseProviderID(long)
	if err == nil || len(err.Error()) > 400 {
		t.Fatalf("error message not bounded: %d bytes", len(err.Error()))
	}
}

func FuzzParseProviderID(f *testing.F) {
	for _, s := range []string{
		"xenorchestra://" + poolA + "/" + vmUUID, "xeorchestra:///" + vmUUID, "aws:///i-1", "", ":",
		"xenorchestra://", "xenorchestra:///", "XENORCHESTRA://a/b", "xenorchestra://" + poolA + "//" + vmUUID,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pool, vm, err := ParseProviderID(s)
		sentinels := 0
		for _, e := range []error{ErrEmptyProviderID, ErrNotOurs, ErrMalformed} {
			if errors.Is(err, e) {
				sentinels++
			}
		}
		if err != nil {
			if sentinels != 1 {
				t.Fatalf("ParseProviderID(%q): error %v matches %d sentinels", s, err, sentinels)
			}
			if pool != "" || vm != "" {
				t.Fatalf("ParseProviderID(%q) returned values with an error", s)
			}
			if s != "" && errors.Is(err, ErrNotOurs) == IsOurs(s) {
				t.Fatalf("IsOurs(%q) = %v disagrees with %v", s, IsOurs(s), err)
			}
			return
		}
		if !IsOurs(s) {
			t.Fatalf("parsed %q but IsOurs is false", s)
		}
		if n, ok := NormalizeUUID(vm); !ok || n != vm {
			t.Fatalf("vm %q is not a lower-case uuid", vm)
		}
		if n, ok := NormalizeUUID(pool); pool != "" && (!ok || n != pool) {
			t.Fatalf("pool %q is neither empty nor a lower-case uuid", pool)
		}
		p2, v2, err := ParseProviderID(FormatProviderID(pool, vm))
		if err != nil || p2 != pool || v2 != vm {
			t.Fatalf("round trip of %q: %q, %q, %v", s, p2, v2, err)
		}
		if !strings.EqualFold(FormatProviderID(pool, vm)[len(ProviderName):], s[strings.IndexByte(s, ':'):]) {
			t.Fatalf("FormatProviderID(%q, %q) does not match %q apart from case and scheme", pool, vm, s)
		}
	})
}
