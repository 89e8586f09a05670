package cloudnode

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// TestNormalEventBudget: a burst of initializations gets normalEventBurst NodeInitialized
// events (and a few more at normalEventRate), the rest counted as suppressed; Warning events
// are never held back.
func TestNormalEventBudget(t *testing.T) {
	const n = 3 * normalEventBurst
	fake := events.NewFakeRecorder(2 * n)
	e := newEventRecorder(fake)
	before := testutil.ToFloat64(eventsSuppressedTotal.WithLabelValues(ReasonNodeInitialized))
	nd := &corev1.Node{}
	for range n {
		e.nodeInitialized(nd, &xo.VM{ID: "vm", PoolID: "pool"}, node.MethodSystemUUID)
		e.xoUnavailable(nd, errors.New("timeout"))
	}
	close(fake.Events)
	normal, warning := 0, 0
	for ev := range fake.Events {
		switch {
		case strings.HasPrefix(ev, corev1.EventTypeNormal+" "+ReasonNodeInitialized):
			normal++
		case strings.HasPrefix(ev, corev1.EventTypeWarning+" "+ReasonXOUnavailable):
			warning++
		}
	}
	suppressed := testutil.ToFloat64(eventsSuppressedTotal.WithLabelValues(ReasonNodeInitialized)) - before
	if normal < normalEventBurst || normal > normalEventBurst+normalEventRate {
		t.Errorf("%d NodeInitialized events out of %d at once, want about %d", normal, n, normalEventBurst)
	}
	if normal+int(suppressed) != n {
		t.Errorf("%d emitted + %v suppressed != %d", normal, suppressed, n)
	}
	if warning != n {
		t.Errorf("%d XOUnavailable warnings out of %d: warnings must never be held back", warning, n)
	}
}
