// Package nodeevents is how the three controllers and the webhook emit events about Nodes: one
// Recorder per component, with one policy for all of them, and the reasons and messages they
// share.
//
// Every Event is an API server write, as costly as the Node patch it reports. So:
//   - an event identical to one the Recorder emitted less than RepeatAfter ago (same Node, type,
//     reason and note) is not emitted again: a standing condition (a tag that makes no valid
//     label, XO down for an uninitialized Node) is reported once, not at every resync or retry,
//     and again once the first report has expired from the API server (kube-apiserver keeps
//     events an hour by default, --event-ttl);
//   - Normal events share a budget, NormalBurst at once then NormalRate per second: in a burst
//     of thousands of Nodes, one NodeInitialized per Node doubled the API server's writes and
//     made the burst 15 to 40 % slower (make bench, 5,000 Nodes: 23 and 25 s without, 28 and
//     41 s with), while saying what the Nodes themselves show;
//   - Warning events are never held back by the budget.
//
// What is not emitted is counted in xenorchestra_node_events_suppressed_total.
package nodeevents

import (
	"fmt"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// The policy's figures.
const (
	// RepeatAfter is how long an identical event is not emitted again: kube-apiserver's default
	// --event-ttl, after which the first one is gone.
	RepeatAfter = time.Hour
	// NormalBurst and NormalRate are the budget of Normal events.
	NormalBurst = 100
	NormalRate  = 10
	// remembered bounds the events a Recorder remembers (about 300 bytes each); past it the
	// oldest are forgotten, and perhaps emitted once more.
	remembered = 20000
)

// Recorder emits events about Nodes for one component. The zero of Recorder is not usable: use
// New. A nil *Recorder, or one made from a nil events.EventRecorder, emits nothing.
type Recorder struct {
	sink      events.EventRecorder
	component string
	clock     clock.PassiveClock
	normal    *rate.Limiter
	sent      *lru.Cache // key → time.Time of the emission
}

// key identifies an event for the repeat rule. The webhook sees a Node before it has a UID; the
// name then tells it apart.
type key struct {
	name              string
	uid               types.UID
	typ, reason, note string
}

// New returns the Recorder of component (a controller's name, or "webhook": the metric's label)
// emitting through sink. clk nil is the real clock.
func New(sink events.EventRecorder, component string, clk clock.PassiveClock) *Recorder {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Recorder{
		sink: sink, component: component, clock: clk,
		normal: rate.NewLimiter(NormalRate, NormalBurst), sent: lru.New(remembered),
	}
}

// Normal emits a Normal event about n, within the budget, unless it repeats one; it reports
// whether it was emitted.
func (r *Recorder) Normal(n *corev1.Node, reason, action, note string, args ...any) bool {
	return r.emit(n, corev1.EventTypeNormal, reason, action, note, args)
}

// Warning emits a Warning event about n unless it repeats one; it reports whether it was
// emitted.
func (r *Recorder) Warning(n *corev1.Node, reason, action, note string, args ...any) bool {
	return r.emit(n, corev1.EventTypeWarning, reason, action, note, args)
}

func (r *Recorder) emit(n *corev1.Node, typ, reason, action, note string, args []any) bool {
	if r == nil || r.sink == nil || n == nil {
		return false
	}
	text := fmt.Sprintf(note, args...)
	k := key{name: n.Name, uid: n.UID, typ: typ, reason: reason, note: text}
	now := r.clock.Now()
	if at, ok := r.sent.Get(k); ok && now.Sub(at.(time.Time)) < RepeatAfter {
		suppressedTotal.WithLabelValues(r.component, reason, "repeat").Inc()
		return false
	}
	if typ == corev1.EventTypeNormal && !r.normal.AllowN(now, 1) {
		suppressedTotal.WithLabelValues(r.component, reason, "budget").Inc()
		return false
	}
	r.sent.Add(k, now)
	r.sink.Eventf(n, nil, typ, reason, action, "%s", text)
	return true
}
