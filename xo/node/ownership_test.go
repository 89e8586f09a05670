package node

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestManagedKeys(t *testing.T) {
	ann := map[string]string{
		AnnotationManagedLabels: " b, a,,a ,Invalid Key,kubernetes.io/hostname,example.com/x",
		AnnotationManagedTaints: "example.com/x:NoSchedule, bad ,example.com/y:Bogus,:NoSchedule,example.com/x:NoSchedule,a:NoExecute",
	}
	if got, want := ManagedKeys(ann), []string{"a", "b", "example.com/x", "kubernetes.io/hostname"}; !slices.Equal(got, want) {
		t.Fatalf("ManagedKeys = %q, want %q", got, want)
	}
	if got, want := ManagedTaints(ann), []string{"a:NoExecute", "example.com/x:NoSchedule"}; !slices.Equal(got, want) {
		t.Fatalf("ManagedTaints = %q, want %q", got, want)
	}
	if got := ManagedKeys(nil); len(got) != 0 {
		t.Fatalf("ManagedKeys(nil) = %q", got)
	}
	if got, want := FormatManagedKeys([]string{"b", "a", "a", ""}), "a,b"; got != want {
		t.Fatalf("FormatManagedKeys = %q, want %q", got, want)
	}
	if got := FormatManagedKeys(nil); got != "" {
		t.Fatalf("FormatManagedKeys(nil) = %q", got)
	}
	keys := []string{LabelZone, "example.com/gpu", LabelVMName}
	back := ManagedKeys(map[string]string{AnnotationManagedLabels: FormatManagedKeys(keys)})
	slices.Sort(keys)
	if !slices.Equal(back, keys) {
		t.Fatalf("round trip = %q, want %q", back, keys)
	}
}

func TestLabelChanges(t *testing.T) {
	const gpu = "example.com/gpu"
	tests := []struct {
		name      string
		current   map[string]string
		owned     []string
		desired   map[string]string
		set       map[string]string
		remove    []string
		newOwned  []string
		conflicts []string
	}{
		{
			name:     "fresh node",
			current:  map[string]string{"kubernetes.io/hostname": "n"},
			desired:  map[string]string{LabelZone: hostA, gpu: "true"},
			set:      map[string]string{LabelZone: hostA, gpu: "true"},
			newOwned: []string{gpu, LabelZone},
		},
		{
			name:     "nothing to do",
			current:  map[string]string{LabelZone: hostA, gpu: "true"},
			owned:    []string{gpu, LabelZone},
			desired:  map[string]string{LabelZone: hostA, gpu: "true"},
			newOwned: []string{gpu, LabelZone},
		},
		{
			name:     "authority key set by someone else is overwritten and owned",
			current:  map[string]string{LabelZone: "by-hand", LabelVMName: "old"},
			desired:  map[string]string{LabelZone: hostA, LabelVMName: "new"},
			set:      map[string]string{LabelZone: hostA, LabelVMName: "new"},
			newOwned: []string{LabelZone, LabelVMName},
		},
		{
			name:     "authority key with the right value is adopted",
			current:  map[string]string{LabelRegion: poolA},
			desired:  map[string]string{LabelRegion: poolA},
			newOwned: []string{LabelRegion},
		},
		{
			name:      "tag key set by someone else is not overwritten",
			current:   map[string]string{gpu: "false"},
			desired:   map[string]string{gpu: "true"},
			conflicts: []string{gpu},
		},
		{
			name:    "tag key with the same value set by someone else is not adopted",
			current: map[string]string{gpu: "true"},
			desired: map[string]string{gpu: "true"},
		},
		{
			name:     "owned tag key is updated",
			current:  map[string]string{gpu: "false"},
			owned:    []string{gpu},
			desired:  map[string]string{gpu: "true"},
			set:      map[string]string{gpu: "true"},
			newOwned: []string{gpu},
		},
		{
			name:     "owned key removed by someone is set again",
			current:  map[string]string{},
			owned:    []string{gpu},
			desired:  map[string]string{gpu: "true"},
			set:      map[string]string{gpu: "true"},
			newOwned: []string{gpu},
		},
		{
			name:    "owned keys no longer desired are removed; absent ones forgotten",
			current: map[string]string{gpu: "true", LabelZone: poolA, "person/label": "x"},
			owned:   []string{gpu, LabelZone, "example.com/gone"},
			desired: map[string]string{},
			remove:  []string{gpu, LabelZone},
		},
		{
			name:    "a person's label is never touched",
			current: map[string]string{"person/label": "x"},
			desired: map[string]string{},
		},
		{
			name:    "a hand-edited annotation cannot make it remove a reserved key",
			current: map[string]string{"kubernetes.io/hostname": "n", "node-role.kubernetes.io/control-plane": ""},
			owned:   []string{"kubernetes.io/hostname", "node-role.kubernetes.io/control-plane"},
			desired: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := maps.Clone(tt.current)
			set, remove, newOwned, conflicts := LabelChanges(tt.current, tt.owned, tt.desired)
			if !maps.Equal(set, tt.set) {
				t.Errorf("set = %v, want %v", set, tt.set)
			}
			if !slices.Equal(remove, tt.remove) {
				t.Errorf("remove = %q, want %q", remove, tt.remove)
			}
			if !slices.Equal(newOwned, tt.newOwned) {
				t.Errorf("newOwned = %q, want %q", newOwned, tt.newOwned)
			}
			if !slices.Equal(conflicts, tt.conflicts) {
				t.Errorf("conflicts = %q, want %q", conflicts, tt.conflicts)
			}
			if !maps.Equal(before, tt.current) {
				t.Errorf("current was modified")
			}
			// Applying the patch and recomputing must be a fixed point.
			after := maps.Clone(tt.current)
			if after == nil {
				after = map[string]string{}
			}
			maps.Copy(after, set)
			for _, k := range remove {
				delete(after, k)
			}
			set2, remove2, owned2, _ := LabelChanges(after, newOwned, tt.desired)
			if len(set2) != 0 || len(remove2) != 0 || !slices.Equal(owned2, newOwned) {
				t.Errorf("not a fixed point: set %v remove %q owned %q", set2, remove2, owned2)
			}
		})
	}
}

func taint(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

func TestTaintChanges(t *testing.T) {
	uninit := taint(TaintUninitialized, "true", corev1.TaintEffectNoSchedule)
	dedicated := taint("example.com/dedicated", "gpu", corev1.TaintEffectNoSchedule)
	tests := []struct {
		name      string
		current   []corev1.Taint
		owned     []string
		desired   []corev1.Taint
		want      []corev1.Taint
		newOwned  []string
		conflicts []string
		changed   bool
	}{
		{
			name:     "add",
			current:  []corev1.Taint{uninit},
			desired:  []corev1.Taint{taint("example.com/z", "", corev1.TaintEffectNoExecute), dedicated},
			want:     []corev1.Taint{uninit, dedicated, taint("example.com/z", "", corev1.TaintEffectNoExecute)},
			newOwned: []string{"example.com/dedicated:NoSchedule", "example.com/z:NoExecute"},
			changed:  true,
		},
		{
			name:     "nothing to do",
			current:  []corev1.Taint{dedicated, uninit},
			owned:    []string{"example.com/dedicated:NoSchedule"},
			desired:  []corev1.Taint{dedicated},
			want:     []corev1.Taint{dedicated, uninit},
			newOwned: []string{"example.com/dedicated:NoSchedule"},
		},
		{
			name:    "owned taint no longer desired is removed",
			current: []corev1.Taint{dedicated, uninit},
			owned:   []string{"example.com/dedicated:NoSchedule"},
			want:    []corev1.Taint{uninit},
			changed: true,
		},
		{
			name:    "same key, other effect is another taint",
			current: []corev1.Taint{taint("example.com/dedicated", "gpu", corev1.TaintEffectNoExecute)},
			owned:   []string{"example.com/dedicated:NoSchedule"},
			want:    []corev1.Taint{taint("example.com/dedicated", "gpu", corev1.TaintEffectNoExecute)},
		},
		{
			name:      "a taint someone else put with another value is left alone",
			current:   []corev1.Taint{taint("example.com/dedicated", "db", corev1.TaintEffectNoSchedule)},
			desired:   []corev1.Taint{dedicated},
			want:      []corev1.Taint{taint("example.com/dedicated", "db", corev1.TaintEffectNoSchedule)},
			conflicts: []string{"example.com/dedicated:NoSchedule"},
		},
		{
			name:     "an owned taint gets its new value",
			current:  []corev1.Taint{taint("example.com/dedicated", "db", corev1.TaintEffectNoSchedule)},
			owned:    []string{"example.com/dedicated:NoSchedule"},
			desired:  []corev1.Taint{dedicated},
			want:     []corev1.Taint{dedicated},
			newOwned: []string{"example.com/dedicated:NoSchedule"},
			changed:  true,
		},
		{
			name:    "the same taint put by someone else is not adopted",
			current: []corev1.Taint{dedicated},
			desired: []corev1.Taint{dedicated},
			want:    []corev1.Taint{dedicated},
		},
		{
			name:    "a hand-edited annotation cannot lift the uninitialized taint",
			current: []corev1.Taint{uninit},
			owned:   []string{TaintUninitialized + ":NoSchedule"},
			want:    []corev1.Taint{uninit},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.current)
			got, newOwned, conflicts, changed := TaintChanges(tt.current, tt.owned, tt.desired)
			if !slices.Equal(got, tt.want) {
				t.Errorf("taints = %v, want %v", got, tt.want)
			}
			if !slices.Equal(newOwned, tt.newOwned) {
				t.Errorf("newOwned = %q, want %q", newOwned, tt.newOwned)
			}
			if !slices.Equal(conflicts, tt.conflicts) {
				t.Errorf("conflicts = %q, want %q", conflicts, tt.conflicts)
			}
			if changed != tt.changed {
				t.Errorf("changed = %v, want %v", changed, tt.changed)
			}
			if !slices.Equal(before, tt.current) {
				t.Errorf("current was modified")
			}
			again, owned2, _, changed2 := TaintChanges(got, newOwned, tt.desired)
			if changed2 || !slices.Equal(again, got) || !slices.Equal(owned2, newOwned) {
				t.Errorf("not a fixed point: %v %q", again, owned2)
			}
		})
	}
}

func TestTaintHelpers(t *testing.T) {
	shutdown := taint(TaintShutdown, "", corev1.TaintEffectNoSchedule)
	uninit := taint(TaintUninitialized, "true", corev1.TaintEffectNoSchedule)
	ts := []corev1.Taint{uninit}

	if HasTaint(ts, TaintShutdown, "") || !HasTaint(ts, TaintUninitialized, "") || !HasTaint(ts, TaintUninitialized, corev1.TaintEffectNoSchedule) || HasTaint(ts, TaintUninitialized, corev1.TaintEffectNoExecute) {
		t.Fatal("HasTaint is wrong")
	}
	with, changed := WithTaint(ts, shutdown)
	if !changed || !slices.Equal(with, []corev1.Taint{uninit, shutdown}) || len(ts) != 1 {
		t.Fatalf("WithTaint = %v, %v", with, changed)
	}
	if again, changed := WithTaint(with, shutdown); changed || !slices.Equal(again, with) {
		t.Fatalf("WithTaint of a present taint = %v, %v", again, changed)
	}
	if upd, changed := WithTaint(with, taint(TaintShutdown, "x", corev1.TaintEffectNoSchedule)); !changed || upd[1].Value != "x" || with[1].Value != "" {
		t.Fatalf("WithTaint update = %v, %v (input %v)", upd, changed, with)
	}
	without, changed := WithoutTaint(with, TaintUninitialized, "")
	if !changed || !slices.Equal(without, []corev1.Taint{shutdown}) || len(with) != 2 {
		t.Fatalf("WithoutTaint = %v, %v", without, changed)
	}
	if same, changed := WithoutTaint(without, TaintUninitialized, ""); changed || !slices.Equal(same, without) {
		t.Fatalf("WithoutTaint of an absent taint = %v, %v", same, changed)
	}
	if same, changed := WithoutTaint(without, TaintShutdown, corev1.TaintEffectNoExecute); changed || len(same) != 1 {
		t.Fatalf("WithoutTaint with another effect = %v, %v", same, changed)
	}
}
