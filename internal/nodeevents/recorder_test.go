package nodeevents

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
)

func testNode(name, uid string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
}

// drain returns the events fake holds, without waiting.
func drain(fake *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-fake.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func suppressed(component, reason, cause string) float64 {
	return testutil.ToFloat64(suppressedTotal.WithLabelValues(component, reason, cause))
}

// TestRepeatsOncePerHour: an event identical to one emitted within the hour (same Node, type,
// reason and note) is dropped and counted; a different note, Node or incarnation (UID), or an
// hour later, is emitted.
func TestRepeatsOncePerHour(t *testing.T) {
	fake := events.NewFakeRecorder(100)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	r := New(fake, "test-repeat", clk)
	a, a2, b := testNode("a", "uid-1"), testNode("a", "uid-2"), testNode("b", "uid-3")
	before := suppressed("test-repeat", ReasonLabelConflict, "repeat")

	steps := []struct {
		what string
		emit func() bool
		want bool
	}{
		{"first", func() bool { return r.LabelConflict(a, "Sync", "k1") }, true},
		{"same again", func() bool { return r.LabelConflict(a, "Sync", "k1") }, false},
		{"another key", func() bool { return r.LabelConflict(a, "Sync", "k2") }, true},
		{"first key again, after the second", func() bool { return r.LabelConflict(a, "Sync", "k1") }, false},
		{"another Node", func() bool { return r.LabelConflict(b, "Sync", "k1") }, true},
		{"the Node registered again (new UID)", func() bool { return r.LabelConflict(a2, "Sync", "k1") }, true},
		{"same note, other type", func() bool {
			return r.Normal(a, ReasonLabelConflict, "Sync", "a VM tag asks for %q, which someone else set to another value: left alone", "k1")
		}, true},
		{"59 min later", func() bool { clk.SetTime(clk.Now().Add(59 * time.Minute)); return r.LabelConflict(a, "Sync", "k1") }, false},
		{"an hour after the first", func() bool { clk.SetTime(clk.Now().Add(time.Minute)); return r.LabelConflict(a, "Sync", "k1") }, true},
		{"then held again", func() bool { return r.LabelConflict(a, "Sync", "k1") }, false},
	}
	emitted := 0
	for _, s := range steps {
		if got := s.emit(); got != s.want {
			t.Errorf("%s: emitted %v, want %v", s.what, got, s.want)
		}
		if s.want {
			emitted++
		}
	}
	if got := drain(fake); len(got) != emitted {
		t.Errorf("the sink got %d events, want %d: %q", len(got), emitted, got)
	}
	// "same again", "first key again", "59 min later", "then held again".
	if got := suppressed("test-repeat", ReasonLabelConflict, "repeat") - before; got != 4 {
		t.Errorf("suppressed{cause=repeat} rose by %v, want 4", got)
	}
}

// TestNormalBudget: a burst of Normal events gets NormalBurst (and a few more at NormalRate
// while the burst lasts), the rest counted as suppressed; Warnings are never held back, and the
// budget refills with time.
func TestNormalBudget(t *testing.T) {
	const n = 3 * NormalBurst
	fake := events.NewFakeRecorder(4 * n)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	r := New(fake, "test-budget", clk)
	before := suppressed("test-budget", "Initialized", "budget")
	for i := range n {
		nd := testNode(fmt.Sprintf("node-%d", i), fmt.Sprintf("uid-%d", i))
		r.Normal(nd, "Initialized", "Initialize", "initialized")
		r.Warning(nd, "Unavailable", "Initialize", "XO did not answer")
	}
	normal, warning := 0, 0
	for _, e := range drain(fake) {
		switch {
		case strings.HasPrefix(e, corev1.EventTypeNormal+" Initialized"):
			normal++
		case strings.HasPrefix(e, corev1.EventTypeWarning+" Unavailable"):
			warning++
		}
	}
	// The fake clock stands still: exactly the burst.
	if normal != NormalBurst {
		t.Errorf("%d Normal events out of %d at once, want %d", normal, n, NormalBurst)
	}
	if got := suppressed("test-budget", "Initialized", "budget") - before; int(got) != n-NormalBurst {
		t.Errorf("suppressed{cause=budget} rose by %v, want %d", got, n-NormalBurst)
	}
	if warning != n {
		t.Errorf("%d Warning events out of %d: Warnings are never held back", warning, n)
	}

	clk.SetTime(clk.Now().Add(time.Second))
	for i := range 2 * NormalRate {
		r.Normal(testNode(fmt.Sprintf("late-%d", i), fmt.Sprintf("late-uid-%d", i)), "Initialized", "Initialize", "initialized")
	}
	if got := len(drain(fake)); got != NormalRate {
		t.Errorf("a second later, %d Normal events went out, want the rate's %d", got, NormalRate)
	}
}

// TestNothingToEmitTo: a nil Recorder, one without a sink, and a nil Node emit nothing and do
// not panic.
func TestNothingToEmitTo(t *testing.T) {
	var nilRecorder *Recorder
	if nilRecorder.Warning(testNode("a", "u"), "R", "A", "note") {
		t.Error("a nil Recorder emitted")
	}
	if New(nil, "test-nil", nil).Normal(testNode("a", "u"), "R", "A", "note") {
		t.Error("a Recorder without a sink emitted")
	}
	fake := events.NewFakeRecorder(1)
	if New(fake, "test-nil", nil).Warning(nil, "R", "A", "note") || len(drain(fake)) != 0 {
		t.Error("an event about no Node was emitted")
	}
}

// TestNoteFormattedOnce: the note reaches the sink formatted, and a % in an argument stays as
// it is (the sink gets "%s" and the text).
func TestNoteFormattedOnce(t *testing.T) {
	fake := events.NewFakeRecorder(1)
	New(fake, "test-format", nil).Warning(testNode("a", "u"), "R", "A", "tag %q", "50%d")
	if got, want := drain(fake), []string{`Warning R tag "50%d"`}; len(got) != 1 || got[0] != want[0] {
		t.Errorf("got %q, want %q", got, want)
	}
}
