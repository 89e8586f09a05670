package testenv

import (
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Event is one event a Recorder kept.
type Event struct {
	// Object and UID name the object the event is about.
	Object, UID string
	// Type is Normal or Warning.
	Type   string
	Reason string
	// Note is the message, formatted.
	Note string
}

// Recorder is an events.EventRecorder that keeps every event, for tests to look at.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

var _ events.EventRecorder = &Recorder{}

// Eventf records an event about regarding.
func (r *Recorder) Eventf(regarding runtime.Object, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	e := Event{Type: eventtype, Reason: reason, Note: fmt.Sprintf(note, args...)}
	if o, ok := regarding.(metav1.Object); ok {
		e.Object, e.UID = o.GetName(), string(o.GetUID())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
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
