package xosim

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestDemoInventory(t *testing.T) {
	data, err := os.ReadFile("../../hack/demo-inventory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	sim := New(Options{Tokens: []string{testToken}})
	if err := sim.LoadInventory(j); err != nil {
		t.Fatal(err)
	}
	pools, hosts, vms := sim.Counts()
	if pools != 2 || hosts != 6 || vms != 8 {
		t.Errorf("Counts %d %d %d", pools, hosts, vms)
	}
	uefi, ok := sim.VM("e865e63f-3d30-4f0b-83e0-5b1a2c3d4e5f")
	if !ok || uefi.Firmware != "uefi" || uefi.GuestSystemUUID() != "3fe665e8-303d-0b4f-83e0-5b1a2c3d4e5f" {
		t.Errorf("UEFI VM: %+v", uefi)
	}
	// The same file gives the same ids.
	sim2 := New(Options{})
	if err := sim2.LoadInventory(j); err != nil {
		t.Fatal(err)
	}
	cp := nameUUID("xosim-vm", "dc1-pool-a", "k8s-cp-1")
	a, ok1 := sim.VM(cp)
	b, ok2 := sim2.VM(cp)
	if !ok1 || !ok2 || a.HostID != b.HostID || a.HostID == "" {
		t.Errorf("ids are not stable: %+v %+v", a, b)
	}
	obj, _ := sim.Object(cp)
	tags, _ := obj["tags"].([]any)
	found := false
	for _, tg := range tags {
		found = found || tg == "k8s.xenorchestra/label:tag.k8s.xenorchestra/env=prod"
	}
	if !found || obj["mainIpAddress"] != "10.0.12.11" {
		t.Errorf("k8s-cp-1: tags %v, mainIpAddress %v", tags, obj["mainIpAddress"])
	}
}

func TestParseInventoryErrors(t *testing.T) {
	in := `{
	  "pools": [
	    {"name": "a", "colour": "red", "hosts": [{"name": "h", "address": "nope", "powerState": "On", "extra": 1}],
	     "vms": [{"name": "v", "host": "other", "powerState": "running", "ips": ["1.2.3"], "firmware": "efi", "cpus": 4, "cpusMax": 2},
	             {"name": "v"},
	             {"name": "w", "id": "not-a-uuid", "memory": "8GB"}]},
	    {"name": "a", "id": "5e0b1a6c-8f2d-4c39-a1e7-0d9b3c4f2a10"},
	    {"name": "b", "id": "5E0B1A6C-8F2D-4C39-A1E7-0D9B3C4F2A10", "vms": [{"name": "x"}]}
	  ],
	  "version": 2
	}`
	_, err := ParseInventory([]byte(in))
	if err == nil {
		t.Fatal("no error")
	}
	// The memory error stops typed decoding; check it alone below.
	for _, want := range []string{`unknown key "version"`, `unknown key "pools[0].colour"`, `unknown key "pools[0].hosts[0].extra"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	in = strings.Replace(in, `"memory": "8GB"`, `"memory": "8GiB"`, 1)
	_, err = ParseInventory([]byte(in))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`unknown key "version"`,
		`unknown key "pools[0].colour"`,
		`pools[0].hosts[0]: invalid address "nope"`,
		`pools[0].hosts[0]: invalid powerState "On"`,
		`pools[0].vms[0]: host "other" is not a host of pool "a"`,
		`pools[0].vms[0]: invalid powerState "running"`,
		`pools[0].vms[0]: invalid IP address "1.2.3"`,
		`pools[0].vms[0]: invalid firmware "efi"`,
		`pools[0].vms[0]: invalid cpus (4) or cpusMax (2)`,
		`pools[0].vms[1]: duplicate VM name "v"`,
		`pools[0].vms[2]: id "not-a-uuid" is not a UUID`,
		`pools[1]: duplicate pool name "a"`,
		`pools[2]: id 5e0b1a6c-8f2d-4c39-a1e7-0d9b3c4f2a10 already used by pools[1]`,
		`pools[2].vms[0]: a running VM needs a host, and pool "b" has none`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := ParseInventory([]byte(`{"pools": [`)); err == nil {
		t.Error("truncated JSON accepted")
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		in      string
		want    ByteSize
		wantErr bool
	}{
		{"1073741824", 1 << 30, false},
		{"8GiB", 8 << 30, false},
		{"8Gi", 8 << 30, false},
		{"512MiB", 512 << 20, false},
		{"1.5GiB", 3 << 29, false},
		{"2TiB", 2 << 40, false},
		{"100B", 100, false},
		{"8GB", 0, true},
		{"-1GiB", 0, true},
		{"GiB", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseByteSize(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseByteSize(%q) = %d, %v", tt.in, got, err)
		}
	}
	var b ByteSize
	if err := b.UnmarshalJSON([]byte(`4096`)); err != nil || b != 4096 {
		t.Errorf("number: %d %v", b, err)
	}
	if err := b.UnmarshalJSON([]byte(`"2GiB"`)); err != nil || b != 2<<30 {
		t.Errorf("string: %d %v", b, err)
	}
	if err := b.UnmarshalJSON([]byte(`true`)); err == nil {
		t.Error("bool accepted")
	}
}

func FuzzParseInventory(f *testing.F) {
	data, err := os.ReadFile("../../hack/demo-inventory.yaml")
	if err != nil {
		f.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(j)
	f.Add([]byte(`{"pools":[{"name":"a","hosts":[{"name":"h"}],"vms":[{"name":"v","memory":"1GiB"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := ParseInventory(data)
		if err != nil {
			return
		}
		// A valid inventory applies without error.
		if err := inv.Apply(New(Options{})); err != nil {
			t.Fatalf("valid inventory does not apply: %v\n%s", err, data)
		}
	})
}
