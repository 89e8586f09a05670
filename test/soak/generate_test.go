package soak_test

import (
	"reflect"
	"testing"
	"time"
)

// TestGenerate: the schedule depends on the seed alone, and the CI run's schedule has every
// kind of step.
func TestGenerate(t *testing.T) {
	a, b := Generate(ciSeed, ciDuration, ciOptions), Generate(ciSeed, ciDuration, ciOptions)
	if !reflect.DeepEqual(a.Steps, b.Steps) || !reflect.DeepEqual(a.VMs, b.VMs) || !reflect.DeepEqual(a.Nodes, b.Nodes) {
		t.Fatal("two schedules from the same seed differ")
	}
	if c := Generate(ciSeed+1, ciDuration, ciOptions); reflect.DeepEqual(a.Steps, c.Steps) {
		t.Fatal("two seeds give the same schedule")
	}
	counts := map[string]int{}
	var last time.Duration
	for _, s := range a.Steps {
		counts[s.Kind]++
		if s.At < last {
			t.Fatalf("step %s before the previous one", s)
		}
		last = s.At
	}
	for _, k := range []string{
		actNodeRegister, actNodeDelete, actNodeReady, actNodeIgnored, actNodeForeign, actNodeForeignSet,
		actVMCreate, actVMDelete, actVMMigrate, actVMPower, actVMRename, actVMResize, actVMTags, actVMMove,
		actXO5xx, actXOHang, actXORefuse, actXO401, actXOStreamCut, actXOTruncate,
		actPoolDrop, actPoolBegin, actPoolReveal, actPoolRevealVMs, actPoolReconnect, actServerDisable, actServerRemove,
		actKillLeader, actKillOther, actAPI429, actAPIRestart, actCARotate, actQuiet,
	} {
		if counts[k] == 0 {
			t.Errorf("the CI schedule (seed %d, %s) has no %s step", ciSeed, ciDuration, k)
		}
	}
	kinds := map[string]int{}
	for _, n := range a.Nodes {
		kinds[n.kind]++
	}
	for _, k := range []string{kindUUID, kindSwapped, kindName, kindAddress, kindProviderID, kindIgnored, kindIgnoredSel, kindForeign} {
		if kinds[k] == 0 {
			t.Errorf("the CI schedule registers no Node of kind %s", k)
		}
	}
	// Every fault ends before the last quiet step, and nothing but the quiet step follows it.
	if s := a.Steps[len(a.Steps)-1]; s.Kind != actQuiet {
		t.Errorf("last step %s, want the quiet step", s)
	}
	t.Logf("CI schedule: %d steps %v", len(a.Steps), counts)
}
