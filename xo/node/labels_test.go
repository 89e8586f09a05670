package node

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

const (
	mib = int64(1) << 20
	gb  = int64(1) << 30
)

func TestInstanceType(t *testing.T) {
	tests := []struct {
		name string
		vm   *xo.VM
		want string
	}{
		{"nil", nil, ""},
		{"1 GiB dynamic", &xo.VM{CPUs: xo.CPUs{Max: 2, Number: 1}, Memory: xo.Memory{Dynamic: [2]int64{gb / 2, gb}, Static: [2]int64{gb / 2, 4 * gb}, Size: 3 * gb}}, "2vCPU-1GB"},
		{"512 MiB", &xo.VM{CPUs: xo.CPUs{Max: 1}, Memory: xo.Memory{Dynamic: [2]int64{512 * mib, 512 * mib}}}, "1vCPU-0.5GB"},
		{"1.5 GiB", &xo.VM{CPUs: xo.CPUs{Max: 4}, Memory: xo.Memory{Dynamic: [2]int64{0, 1536 * mib}}}, "4vCPU-1.5GB"},
		{"1000 MiB", &xo.VM{CPUs: xo.CPUs{Max: 2}, Memory: xo.Memory{Dynamic: [2]int64{0, 1000 * mib}}}, "2vCPU-0.98GB"},
		{"1.05 GiB", &xo.VM{CPUs: xo.CPUs{Max: 2}, Memory: xo.Memory{Dynamic: [2]int64{0, gb + gb/20 + 1}}}, "2vCPU-1.05GB"},
		{"just under 2 GiB rounds up", &xo.VM{CPUs: xo.CPUs{Max: 2}, Memory: xo.Memory{Dynamic: [2]int64{0, 2*gb - 1}}}, "2vCPU-2GB"},
		{"6 MiB", &xo.VM{CPUs: xo.CPUs{Max: 1}, Memory: xo.Memory{Size: 6 * mib}}, "1vCPU-0.01GB"},
		{"1 MiB rounds to nothing", &xo.VM{CPUs: xo.CPUs{Max: 1}, Memory: xo.Memory{Size: mib}}, ""},
		{"static when no dynamic", &xo.VM{CPUs: xo.CPUs{Max: 8}, Memory: xo.Memory{Static: [2]int64{gb, 16 * gb}, Size: 3 * gb}}, "8vCPU-16GB"},
		{"static when dynamic is zero", &xo.VM{CPUs: xo.CPUs{Max: 8}, Memory: xo.Memory{Dynamic: [2]int64{0, 0}, Static: [2]int64{gb, 16 * gb}}}, "8vCPU-16GB"},
		{"static when dynamic is short", &xo.VM{CPUs: xo.CPUs{Max: 8}, Memory: xo.Memory{Dynamic: [2]int64{gb}, Static: [2]int64{gb, 16 * gb}}}, "8vCPU-16GB"},
		{"size as last resort", &xo.VM{CPUs: xo.CPUs{Max: 8}, Memory: xo.Memory{Size: 3 * gb}}, "8vCPU-3GB"},
		{"CPUs.number when max is 0", &xo.VM{CPUs: xo.CPUs{Number: 3}, Memory: xo.Memory{Size: gb}}, "3vCPU-1GB"},
		{"no CPUs", &xo.VM{Memory: xo.Memory{Size: gb}}, ""},
		{"negative CPUs", &xo.VM{CPUs: xo.CPUs{Max: -1}, Memory: xo.Memory{Size: gb}}, ""},
		{"no memory", &xo.VM{CPUs: xo.CPUs{Max: 2}}, ""},
		{"negative memory", &xo.VM{CPUs: xo.CPUs{Max: 2}, Memory: xo.Memory{Size: -gb}}, ""},
		{"huge", &xo.VM{CPUs: xo.CPUs{Max: 2}, Memory: xo.Memory{Size: 1 << 62}}, "2vCPU-4294967296GB"},
		{"max int64", &xo.VM{CPUs: xo.CPUs{Max: 2}, Memory: xo.Memory{Size: 1<<63 - 1}}, "2vCPU-8589934592GB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := InstanceType(tt.vm)
			if got != tt.want {
				t.Fatalf("InstanceType = %q, want %q", got, tt.want)
			}
			if got != "" && len(validation.IsValidLabelValue(got)) > 0 {
				t.Fatalf("InstanceType %q is not a valid label value", got)
			}
		})
	}
}

func TestSanitizeLabelValue(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"worker-1", "worker-1", true},
		{"My VM (prod)", "My-VM-prod", true},
		{"evil\nname\r\n", "evil-name", true},
		{"a  b", "a-b", true},
		{"a -b", "a--b", true},
		{"héllo", "h-llo", true},
		{"🚀rocket🚀", "rocket", true},
		{"_x_", "x", true},
		{".a.b.", "a.b", true},
		{"ÄÖÜ", "", false},
		{"日本語", "", false},
		{"", "", false},
		{"---", "", false},
		{"\x00\xff", "", false},
		{strings.Repeat("a", 500), strings.Repeat("a", 63), true},
		// Cut first, then trim: a cut that ends on a separator never leaves it at the end.
		{strings.Repeat("a", 62) + " tail", strings.Repeat("a", 62), true},
		{strings.Repeat("a", 62) + "-tail", strings.Repeat("a", 62), true},
		{strings.Repeat("a", 62) + "_", strings.Repeat("a", 62), true},
		{"-" + strings.Repeat("b", 63), strings.Repeat("b", 62), true},
		{strings.Repeat("é", 40) + "x", "x", true},
	}
	for _, tt := range tests {
		got, ok := SanitizeLabelValue(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("SanitizeLabelValue(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
		if ok && len(validation.IsValidLabelValue(got)) > 0 {
			t.Errorf("SanitizeLabelValue(%q) = %q is not a valid label value", tt.in, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { SanitizeLabelValue("already-valid.value_1") }); n != 0 {
		t.Errorf("SanitizeLabelValue of a valid value allocates %v times", n)
	}
}

func FuzzSanitizeLabelValue(f *testing.F) {
	for _, s := range []string{"", "a", "My VM", "🚀", strings.Repeat("x", 70) + "-", "a\x00b", "-._"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := SanitizeLabelValue(s)
		if !ok {
			if got != "" {
				t.Fatalf("SanitizeLabelValue(%q) = %q with ok=false", s, got)
			}
			return
		}
		if got == "" || len(validation.IsValidLabelValue(got)) > 0 {
			t.Fatalf("SanitizeLabelValue(%q) = %q: not a valid non-empty label value", s, got)
		}
		if again, ok := SanitizeLabelValue(got); !ok || again != got {
			t.Fatalf("SanitizeLabelValue is not idempotent on %q: %q", got, again)
		}
		if len(validation.IsValidLabelValue(s)) == 0 && s != "" && got != s {
			t.Fatalf("valid value %q changed to %q", s, got)
		}
	})
}

func runningVM() *xo.VM {
	return &xo.VM{
		ID: vmUUID, NameLabel: "k8s-worker-1", PowerState: xo.PowerStateRunning,
		PoolID: poolA, Container: hostA,
		CPUs:   xo.CPUs{Max: 4, Number: 4},
		Memory: xo.Memory{Dynamic: [2]int64{8 * gb, 8 * gb}, Static: [2]int64{2 * gb, 8 * gb}, Size: 8 * gb},
	}
}

func with(vm *xo.VM, f func(*xo.VM)) *xo.VM { f(vm); return vm }

var (
	host1 = &xo.Host{ID: hostA, NameLabel: "xcp-host-01", PoolID: poolA, PowerState: "Running"}
	pool1 = &xo.Pool{ID: poolA, NameLabel: "dc1 pool A"}
)

func TestDesiredLabels(t *testing.T) {
	tests := []struct {
		name     string
		vm       *xo.VM
		host     *xo.Host
		pool     *xo.Pool
		current  map[string]string
		want     map[string]string
		rejected []RejectReason
	}{
		{
			name: "running VM, first sight",
			vm:   runningVM(), host: host1, pool: pool1,
			want: map[string]string{
				LabelInstanceType: "4vCPU-8GB", LabelRegion: poolA, LabelZone: hostA,
				LabelPoolID: poolA, LabelPoolName: "dc1-pool-A", LabelHostID: hostA, LabelHostName: "xcp-host-01",
				LabelVMName: "k8s-worker-1", LabelOriginalHostID: hostA, LabelOriginalPoolID: poolA,
			},
		},
		{
			name: "paused VM counts as resident",
			vm:   with(runningVM(), func(v *xo.VM) { v.PowerState = xo.PowerStatePaused }), host: host1, pool: pool1,
			want: map[string]string{
				LabelInstanceType: "4vCPU-8GB", LabelRegion: poolA, LabelZone: hostA,
				LabelPoolID: poolA, LabelPoolName: "dc1-pool-A", LabelHostID: hostA, LabelHostName: "xcp-host-01",
				LabelVMName: "k8s-worker-1", LabelOriginalHostID: hostA, LabelOriginalPoolID: poolA,
			},
		},
		{
			name: "upper-case ids are lower-cased",
			vm: with(runningVM(), func(v *xo.VM) {
				v.PoolID, v.Container = strings.ToUpper(poolA), strings.ToUpper(hostA)
			}),
			host: host1, pool: pool1,
			want: map[string]string{
				LabelInstanceType: "4vCPU-8GB", LabelRegion: poolA, LabelZone: hostA,
				LabelPoolID: poolA, LabelPoolName: "dc1-pool-A", LabelHostID: hostA, LabelHostName: "xcp-host-01",
				LabelVMName: "k8s-worker-1", LabelOriginalHostID: hostA, LabelOriginalPoolID: poolA,
			},
		},
		{
			name: "halted VM keeps the current zone, never the pool uuid",
			vm: with(runningVM(), func(v *xo.VM) {
				v.PowerState, v.Container = xo.PowerStateHalted, poolA
			}),
			host: nil, pool: pool1,
			current: map[string]string{LabelZone: hostB, LabelHostID: hostB, LabelHostName: "xcp-host-02", LabelOriginalHostID: hostA, LabelOriginalPoolID: poolA},
			want: map[string]string{
				LabelInstanceType: "4vCPU-8GB", LabelRegion: poolA, LabelZone: hostB,
				LabelPoolID: poolA, LabelPoolName: "dc1-pool-A", LabelHostID: hostB, LabelHostName: "xcp-host-02",
				LabelVMName: "k8s-worker-1", LabelOriginalHostID: hostA, LabelOriginalPoolID: poolA,
			},
		},
		{
			name: "halted VM even with a host given does not use $container",
			vm: with(runningVM(), func(v *xo.VM) {
				v.PowerState, v.Container = xo.PowerStateHalted, hostA // local-SR VM: $container is that SR's host
			}),
			host: host1, pool: pool1,
			want: map[string]string{
				LabelInstanceType: "4vCPU-8GB", LabelRegion: poolA,
				LabelPoolID: poolA, LabelPoolName: "dc1-pool-A",
				LabelVMName: "k8s-worker-1", LabelOriginalPoolID: poolA,
			},
		},
		{
			name: "halted VM, zone wrongly set to the pool uuid (upstream bug) is not kept",
			vm: with(runningVM(), func(v *xo.VM) {
				v.PowerState, v.Container = xo.PowerStateHalted, poolA
			}),
			pool:    pool1,
			current: map[string]string{LabelZone: poolA, LabelHostID: poolA, LabelHostName: "whatever"},
			want: map[string]string{
				LabelInstanceType: "4vCPU-8GB", LabelRegion: poolA,
				LabelPoolID: poolA, LabelPoolName: "dc1-pool-A",
				LabelVMName: "k8s-worker-1", LabelOriginalPoolID: poolA,
			},
		},
		{
			name: "suspended VM with nothing current gets no zone",
			vm: with(runningVM(), func(v *xo.VM) {
				v.PowerState, v.Container = xo.PowerStateSuspended, poolA
			}),
			pool: pool1,
			want: map[string]string{
				LabelInstanceType: "4vCPU-8GB", LabelRegion: poolA,
				LabelPoolID: poolA, LabelPoolName: "dc1-pool-A",
				LabelVMName: "k8s-worker-1", LabelOriginalPoolID: poolA,
			},
		},
		{
			name: "running VM whose host is unknown keeps the current host labels",
			vm:   runningVM(), host: nil, pool: nil,
			current: map[string]string{LabelZone: hostB, LabelHostID: hostB, LabelHostName: "xcp-host-02", LabelPoolName: "old-pool-name"},
			want: map[string]string{
				LabelInstanceType: "4vCPU-8GB", LabelRegion: poolA, LabelZone: hostB,
				LabelPoolID: poolA, LabelPoolName: "old-pool-name", LabelHostID: hostB, LabelHostName: "xcp-host-02",
				LabelVMName: "k8s-worker-1", LabelOriginalHostID: hostB, LabelOriginalPoolID: poolA,
			},
		},
		{
			name: "a host that is not the VM's container is ignored",
			vm:   runningVM(), host: &xo.Host{ID: hostB, NameLabel: "other"}, pool: pool1,
			want: map[string]string{
				LabelInstanceType: "4vCPU-8GB", LabelRegion: poolA,
				LabelPoolID: poolA, LabelPoolName: "dc1-pool-A",
				LabelVMName: "k8s-worker-1", LabelOriginalPoolID: poolA,
			},
		},
		{
			name: "live migration: zone follows, originals stay",
			vm:   with(runningVM(), func(v *xo.VM) { v.Container = hostB }),
			host: &xo.Host{ID: hostB, NameLabel: "xcp-host-02"}, pool: pool1,
			current: map[string]string{LabelZone: hostA, LabelHostID: hostA, LabelHostName: "xcp-host-01", LabelPoolID: poolA, LabelOriginalHostID: hostA, LabelOriginalPoolID: poolA},
			want: map[string]string{
				LabelInstanceType: "4vCPU-8GB", LabelRegion: poolA, LabelZone: hostB,
				LabelPoolID: poolA, LabelPoolName: "dc1-pool-A", LabelHostID: hostB, LabelHostName: "xcp-host-02",
				LabelVMName: "k8s-worker-1", LabelOriginalHostID: hostA, LabelOriginalPoolID: poolA,
			},
		},
		{
			name: "migration of a node labelled before originals existed records the earlier host",
			vm:   with(runningVM(), func(v *xo.VM) { v.Container = hostB; v.PoolID = poolB }),
			host: &xo.Host{ID: hostB, NameLabel: "xcp-host-02"}, pool: &xo.Pool{ID: poolB, NameLabel: "b"},
			current: map[string]string{LabelHostID: hostA, LabelPoolID: poolA},
			want: map[string]string{
				LabelInstanceType: "4vCPU-8GB", LabelRegion: poolB, LabelZone: hostB,
				LabelPoolID: poolB, LabelPoolName: "b", LabelHostID: hostB, LabelHostName: "xcp-host-02",
				LabelVMName: "k8s-worker-1", LabelOriginalHostID: hostA, LabelOriginalPoolID: poolA,
			},
		},
		{
			name: "hostile names are sanitized or dropped",
			vm:   with(runningVM(), func(v *xo.VM) { v.NameLabel = "evil\nname\u2028" + strings.Repeat("z", 500) }),
			host: &xo.Host{ID: hostA, NameLabel: "🚀🚀"}, pool: &xo.Pool{ID: poolA, NameLabel: "\n"},
			want: map[string]string{
				LabelInstanceType: "4vCPU-8GB", LabelRegion: poolA, LabelZone: hostA,
				LabelPoolID: poolA, LabelHostID: hostA,
				LabelVMName: "evil-name-" + strings.Repeat("z", 53), LabelOriginalHostID: hostA, LabelOriginalPoolID: poolA,
			},
			rejected: []RejectReason{ReasonUnsanitizable, ReasonUnsanitizable},
		},
		{
			name: "an id that is not a label value is rejected",
			vm:   with(runningVM(), func(v *xo.VM) { v.PoolID = "pool with spaces"; v.NameLabel = "" }),
			host: host1,
			want: map[string]string{
				LabelInstanceType: "4vCPU-8GB", LabelZone: hostA, LabelHostID: hostA, LabelHostName: "xcp-host-01",
				LabelOriginalHostID: hostA,
			},
			rejected: []RejectReason{ReasonInvalidID, ReasonInvalidID},
		},
		{
			name: "nil VM",
			want: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := desiredFor(tt.vm, tt.host, tt.pool, tt.current, LabelOptions{})
			if !maps.Equal(d.Labels, tt.want) {
				t.Fatalf("Labels:\n got %v\nwant %v", d.Labels, tt.want)
			}
			var reasons []RejectReason
			for _, r := range d.Rejected {
				reasons = append(reasons, r.Reason)
			}
			if strings.Join(toStrings(reasons), ",") != strings.Join(toStrings(tt.rejected), ",") {
				t.Fatalf("Rejected = %v, want reasons %v", d.Rejected, tt.rejected)
			}
			assertValidLabels(t, d)
			if tt.vm != nil && d.Labels[LabelZone] == strings.ToLower(tt.vm.PoolID) {
				t.Fatalf("zone is the pool uuid")
			}
		})
	}
}

func toStrings(rs []RejectReason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func assertValidLabels(t *testing.T, d DesiredState) {
	t.Helper()
	for k, v := range d.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Fatalf("invalid label key %q: %v", k, errs)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("invalid label value %q=%q: %v", k, v, errs)
		}
	}
	for _, tn := range d.Taints {
		if errs := validation.IsQualifiedName(tn.Key); len(errs) > 0 {
			t.Fatalf("invalid taint key %q: %v", tn.Key, errs)
		}
		if errs := validation.IsValidLabelValue(tn.Value); len(errs) > 0 {
			t.Fatalf("invalid taint value %q: %v", tn.Value, errs)
		}
		if !validEffect(tn.Effect) {
			t.Fatalf("invalid taint effect %q", tn.Effect)
		}
		if IsReservedKey(tn.Key) {
			t.Fatalf("reserved taint key %q", tn.Key)
		}
	}
}

// computedKeys are the keys Desired computes (not from tags).
var computedKeys = map[string]bool{
	LabelInstanceType: true, LabelRegion: true, LabelZone: true, LabelPoolID: true, LabelPoolName: true,
	LabelHostID: true, LabelHostName: true, LabelVMName: true, LabelOriginalHostID: true, LabelOriginalPoolID: true,
}

func tagLabelsOnly(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if !computedKeys[k] {
			out[k] = v
		}
	}
	return out
}

func TestDesiredTagLabels(t *testing.T) {
	l := func(s string) string { return TagLabelPrefix + s }
	tests := []struct {
		name     string
		tags     []string
		prefixes []string
		want     map[string]string
		rejected map[string]RejectReason // key → reason
	}{
		{
			name:     "allowed prefixes",
			tags:     []string{"prod", "cluster=prod", l("example.com/gpu=true"), l("example.com/empty="), l("example.com/bare"), l("team-a=x"), l("example.com/same=1"), l("example.com/same=1")},
			prefixes: []string{"example.com/", "team-"},
			want:     map[string]string{"example.com/gpu": "true", "example.com/empty": "", "example.com/bare": "", "team-a": "x", "example.com/same": "1"},
		},
		{
			name: "reserved keys are refused whatever the allow-list says",
			tags: []string{
				l("node-role.kubernetes.io/control-plane="), l("kubernetes.io/hostname=evil"), l("foo.k8s.io/x=y"),
				l("node-restriction.kubernetes.io/x=y"), l("k8s.io/x=y"), l("topology.k8s.xenorchestra/host_id=x"),
				l("vm.k8s.xenorchestra/name_label=x"), l("node.k8s.xenorchestra/managed-labels=x"), l("topology.kubernetes.io/zone=x"),
			},
			prefixes: []string{"", "kubernetes.io/", "node-role.kubernetes.io/"},
			want:     map[string]string{},
			rejected: map[string]RejectReason{
				"node-role.kubernetes.io/control-plane": ReasonReservedKey, "kubernetes.io/hostname": ReasonReservedKey,
				"foo.k8s.io/x": ReasonReservedKey, "node-restriction.kubernetes.io/x": ReasonReservedKey, "k8s.io/x": ReasonReservedKey,
				"topology.k8s.xenorchestra/host_id": ReasonReservedKey, "vm.k8s.xenorchestra/name_label": ReasonReservedKey,
				"node.k8s.xenorchestra/managed-labels": ReasonReservedKey, "topology.kubernetes.io/zone": ReasonReservedKey,
			},
		},
		{
			name:     "look-alike domains are not reserved",
			tags:     []string{l("notkubernetes.io/x=y"), l("k8s.io.example.com/x=y")},
			prefixes: []string{""},
			want:     map[string]string{"notkubernetes.io/x": "y", "k8s.io.example.com/x": "y"},
		},
		{
			name:     "no prefixes configured: no tag labels",
			tags:     []string{l("example.com/gpu=true")},
			want:     map[string]string{},
			rejected: map[string]RejectReason{"example.com/gpu": ReasonPrefixNotAllowed},
		},
		{
			name:     "invalid keys and values",
			tags:     []string{l("Example.com/x=y"), l("example.com/bad=has space"), l("example.com/long=" + strings.Repeat("v", 64)), l("=v"), l("example.com/=v"), l("example.com/x/y=z")},
			prefixes: []string{""},
			want:     map[string]string{},
			rejected: map[string]RejectReason{
				"Example.com/x": ReasonInvalidKey, "example.com/bad": ReasonInvalidValue, "example.com/long": ReasonInvalidValue,
				"": ReasonInvalidKey, "example.com/": ReasonInvalidKey, "example.com/x/y": ReasonInvalidKey,
			},
		},
		{
			name:     "prefix not allowed",
			tags:     []string{l("other.com/x=y")},
			prefixes: []string{"example.com/"},
			want:     map[string]string{},
			rejected: map[string]RejectReason{"other.com/x": ReasonPrefixNotAllowed},
		},
		{
			name:     "conflicting tags refuse the key",
			tags:     []string{l("example.com/dup=a"), l("example.com/dup=b"), l("example.com/dup=c"), l("example.com/ok=1")},
			prefixes: []string{"example.com/"},
			want:     map[string]string{"example.com/ok": "1"},
			rejected: map[string]RejectReason{"example.com/dup": ReasonConflictingTags},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vm := runningVM()
			vm.Tags = tt.tags
			d := desiredFor(vm, host1, pool1, nil, LabelOptions{TagLabelPrefixes: tt.prefixes})
			if got := tagLabelsOnly(d.Labels); !maps.Equal(got, tt.want) {
				t.Fatalf("tag labels = %v, want %v", got, tt.want)
			}
			got := map[string]RejectReason{}
			for _, r := range d.Rejected {
				if r.Kind != KindLabel {
					t.Fatalf("rejection of kind %q", r.Kind)
				}
				if _, dup := got[r.Key]; dup {
					t.Fatalf("key %q rejected twice: %v", r.Key, d.Rejected)
				}
				got[r.Key] = r.Reason
				if s := r.String(); !strings.Contains(s, string(r.Reason)) || strings.Contains(s, "\n") {
					t.Fatalf("Rejection.String() = %q", s)
				}
			}
			if !maps.Equal(got, tt.rejected) && (len(got) != 0 || len(tt.rejected) != 0) {
				t.Fatalf("rejected = %v, want %v", got, tt.rejected)
			}
			assertValidLabels(t, d)
		})
	}
}

func TestDesiredTagTaints(t *testing.T) {
	tn := func(s string) string { return TagTaintPrefix + s }
	vm := runningVM()
	vm.Tags = []string{
		tn("example.com/zz=last:NoExecute"),
		tn("example.com/dedicated=gpu:NoSchedule"),
		tn("example.com/dedicated=gpu:PreferNoSchedule"),
		tn("example.com/novalue:NoExecute"),
		tn("example.com/bad=y:Bogus"),
		tn("example.com/noeffect=y"),
		tn("example.com/colon=a:b:NoSchedule"),
		tn("node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"),
		tn("node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule"),
		tn("other.com/x:NoSchedule"),
		tn("example.com/dup=a:NoSchedule"), tn("example.com/dup=b:NoSchedule"),
		TagLabelPrefix + "example.com/label-not-taint=x",
	}
	d := desiredFor(vm, host1, pool1, nil, LabelOptions{TagTaintPrefixes: []string{"example.com/", "node."}})
	want := []corev1.Taint{
		{Key: "example.com/dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/dedicated", Value: "gpu", Effect: corev1.TaintEffectPreferNoSchedule},
		{Key: "example.com/novalue", Effect: corev1.TaintEffectNoExecute},
		{Key: "example.com/zz", Value: "last", Effect: corev1.TaintEffectNoExecute},
	}
	if len(d.Taints) != len(want) {
		t.Fatalf("Taints = %v, want %v", d.Taints, want)
	}
	for i := range want {
		if d.Taints[i] != want[i] {
			t.Fatalf("Taints[%d] = %v, want %v", i, d.Taints[i], want[i])
		}
	}
	wantRej := map[string]RejectReason{
		"example.com/bad": ReasonInvalidEffect, "example.com/noeffect=y": ReasonMalformedTag,
		"example.com/colon": ReasonInvalidValue, "node.kubernetes.io/out-of-service": ReasonReservedKey,
		"node.cloudprovider.kubernetes.io/uninitialized": ReasonReservedKey, "other.com/x": ReasonPrefixNotAllowed,
		"example.com/dup": ReasonConflictingTags,
	}
	got := map[string]RejectReason{}
	for _, r := range d.Rejected {
		switch r.Kind {
		case KindTaint:
			got[r.Key] = r.Reason
		case KindLabel:
			if r.Key != "example.com/label-not-taint" || r.Reason != ReasonPrefixNotAllowed {
				t.Fatalf("unexpected label rejection %v", r)
			}
		}
	}
	if !maps.Equal(got, wantRej) {
		t.Fatalf("rejected = %v, want %v", got, wantRej)
	}
	assertValidLabels(t, d)
}

func TestDesiredIsDeterministic(t *testing.T) {
	vm := runningVM()
	for i := 0; i < 20; i++ {
		vm.Tags = append(vm.Tags, TagTaintPrefix+"example.com/t"+strings.Repeat("x", i)+":NoSchedule", TagLabelPrefix+"bad key "+strings.Repeat("y", i))
	}
	opts := LabelOptions{TagLabelPrefixes: []string{""}, TagTaintPrefixes: []string{""}}
	first := desiredFor(vm, host1, pool1, nil, opts)
	for i := 0; i < 10; i++ {
		again := desiredFor(vm, host1, pool1, nil, opts)
		if len(again.Taints) != len(first.Taints) || len(again.Rejected) != len(first.Rejected) {
			t.Fatal("lengths differ between runs")
		}
		for j := range first.Taints {
			if first.Taints[j] != again.Taints[j] {
				t.Fatalf("taint order differs at %d", j)
			}
		}
		for j := range first.Rejected {
			if first.Rejected[j] != again.Rejected[j] {
				t.Fatalf("rejection order differs at %d", j)
			}
		}
	}
}

func FuzzTagLabels(f *testing.F) {
	for _, s := range []string{
		"example.com/x=y", "kubernetes.io/hostname=a", "node-role.kubernetes.io/control-plane=", "foo.k8s.io/x=1",
		"x=y:NoSchedule", "a/b/c=d", "=", "k=v=w:NoExecute", "k:", "topology.k8s.xenorchestra/zone=a",
	} {
		f.Add(s, "vm name", "example.com/")
	}
	f.Fuzz(func(t *testing.T, tag, name, prefix string) {
		vm := runningVM()
		vm.NameLabel = name
		vm.Tags = []string{TagLabelPrefix + tag, TagTaintPrefix + tag, tag}
		for _, prefixes := range [][]string{{""}, {prefix}} {
			d := desiredFor(vm, &xo.Host{ID: hostA, NameLabel: name}, &xo.Pool{ID: poolA, NameLabel: name}, nil,
				LabelOptions{TagLabelPrefixes: prefixes, TagTaintPrefixes: prefixes})
			assertValidLabels(t, d)
			for k := range tagLabelsOnly(d.Labels) {
				if IsReservedKey(k) {
					t.Fatalf("tag %q produced the reserved label key %q", tag, k)
				}
				if !hasAllowedPrefix(k, prefixes) {
					t.Fatalf("tag %q produced label key %q outside prefixes %q", tag, k, prefixes)
				}
			}
			for _, r := range d.Rejected {
				if len(r.Key) > maxRejectedValue+3 || len(r.Value) > maxRejectedValue+3 {
					t.Fatalf("rejection not bounded: %d/%d bytes", len(r.Key), len(r.Value))
				}
			}
		}
	})
}

func BenchmarkDesired(b *testing.B) {
	vm := runningVM()
	vm.Tags = []string{"prod", TagLabelPrefix + "example.com/gpu=true", TagTaintPrefix + "example.com/dedicated=gpu:NoSchedule"}
	opts := LabelOptions{TagLabelPrefixes: []string{"example.com/"}, TagTaintPrefixes: []string{"example.com/"}}
	current := map[string]string{"kubernetes.io/hostname": "n1"}
	b.ReportAllocs()
	for b.Loop() {
		desiredFor(vm, host1, pool1, current, opts)
	}
}

func BenchmarkSanitizeLabelValue(b *testing.B) {
	for _, in := range []string{"k8s-worker-1", "My VM (prod) 🚀 " + strings.Repeat("x", 80)} {
		b.Run(fmt.Sprintf("len%d", len(in)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				SanitizeLabelValue(in)
			}
		})
	}
}
