package testenv

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Event is one event a Recorder kept.
type Event struct {
	// Object and UID name the object the event is about.
	Object, UID string
	// Type is Normal or Warning.
	Type           string
	Reason, Action string
	// Note is the message, formatted.
	Note string
}

// The limits events.k8s.io/v1 puts on an Event (kube-apiserver's event validation): an event
// beyond them is refused by the API server, and lost.
const (
	reasonLengthLimit = 128
	actionLengthLimit = 128
	noteLengthLimit   = 1024
)

// Recorder is an events.EventRecorder that keeps every event, for tests to look at, and every
// event the API server would refuse (Invalid).
type Recorder struct {
	mu      sync.Mutex
	events  []Event
	invalid []string
}

var _ events.EventRecorder = &Recorder{}

// Eventf records an event about regarding.
func (r *Recorder) Eventf(regarding runtime.Object, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	e := Event{Type: eventtype, Reason: reason, Action: action, Note: fmt.Sprintf(note, args...)}
	if o, ok := regarding.(metav1.Object); ok {
		e.Object, e.UID = o.GetName(), string(o.GetUID())
	}
	var problems []string
	if e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
		problems = append(problems, fmt.Sprintf("type %q is neither Normal nor Warning", e.Type))
	}
	if e.Reason == "" || len(e.Reason) > reasonLengthLimit {
		problems = append(problems, fmt.Sprintf("reason %q is empty or over %d bytes", e.Reason, reasonLengthLimit))
	}
	if e.Action == "" || len(e.Action) > actionLengthLimit {
		problems = append(problems, fmt.Sprintf("action %q is empty or over %d bytes", e.Action, actionLengthLimit))
	}
	if len(e.Note) > noteLengthLimit {
		problems = append(problems, fmt.Sprintf("note of %d bytes, over %d", len(e.Note), noteLengthLimit))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	for _, p := range problems {
		r.invalid = append(r.invalid, fmt.Sprintf("event %s on %s: %s", e.Reason, e.Object, p))
	}
}

// FailOnInvalid fails t, when it ends, for each event recorded by then that the API server
// would refuse.
func (r *Recorder) FailOnInvalid(t testing.TB) {
	t.Cleanup(func() {
		for _, p := range r.Invalid() {
			t.Errorf("the API server would refuse this %s", p)
		}
	})
}

// Invalid returns what the API server would refuse in the events recorded so far.
func (r *Recorder) Invalid() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.invalid)
}

// Find returns the events with this reason about the object named name.
func (r *Recorder) Find(name, reason string) []Event {
	return r.filter(func(e Event) bool { return e.Object == name && e.Reason == reason })
}

// All returns the events about the object named name.
func (r *Recorder) All(name string) []Event {
	return r.filter(func(e Event) bool { return e.Object == name })
}

func (r *Recorder) filter(keep func(Event) bool) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.events {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}
