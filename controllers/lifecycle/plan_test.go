package lifecycle

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

func TestPlanTaints(t *testing.T) {
	shutdown := corev1.Taint{Key: node.TaintShutdown, Effect: corev1.TaintEffectNoSchedule}
	oos := corev1.Taint{Key: node.TaintOutOfService, Value: OutOfServiceValue, Effect: corev1.TaintEffectNoExecute}
	humanOOS := corev1.Taint{Key: node.TaintOutOfService, Value: "x", Effect: corev1.TaintEffectNoSchedule}
	owned := map[string]string{node.AnnotationOutOfService: "true"}
	vm := func(state string) *xo.VM { return &xo.VM{ID: "v", PowerState: state} }
	mk := func(ann map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: ann}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	tests := []struct {
		name                    string
		n                       *corev1.Node
		vm                      *xo.VM
		ready, current, trusted bool
		opt                     bool
		want                    TaintPlan
	}{
		{"running, nothing to do", mk(nil), vm(xo.PowerStateRunning), false, true, true, true, TaintPlan{}},
		{"halted NotReady", mk(nil), vm(xo.PowerStateHalted), false, true, true, false, TaintPlan{AddShutdown: true}},
		{"halted NotReady opt-in", mk(nil), vm(xo.PowerStateHalted), false, true, true, true, TaintPlan{AddShutdown: true, AddOutOfService: true, Own: true}},
		{"halted NotReady, not current: nothing", mk(nil), vm(xo.PowerStateHalted), false, false, false, false, TaintPlan{}},
		{"halted NotReady opt-in, not current: nothing", mk(nil), vm(xo.PowerStateHalted), false, false, false, true, TaintPlan{}},
		{"suspended, not current: nothing", mk(nil), vm(xo.PowerStateSuspended), false, false, false, true, TaintPlan{}},
		{"owned taint lifted by someone, opt-out, not current: kept owned", mk(owned, shutdown), vm(xo.PowerStateHalted), false, false, false, false, TaintPlan{}},
		{"suspended opt-in: shutdown only", mk(nil), vm(xo.PowerStateSuspended), false, true, true, true, TaintPlan{AddShutdown: true}},
		{"paused", mk(nil), vm(xo.PowerStatePaused), false, true, true, false, TaintPlan{AddShutdown: true}},
		{"halted Ready: nothing", mk(nil), vm(xo.PowerStateHalted), true, true, true, true, TaintPlan{}},
		{"already tainted", mk(owned, shutdown, oos), vm(xo.PowerStateHalted), false, true, true, true, TaintPlan{}},
		{"running trusted lifts", mk(owned, shutdown, oos), vm(xo.PowerStateRunning), false, true, true, true, TaintPlan{RemoveShutdown: true, RemoveOutOfService: true, Disown: true}},
		{"halted NotReady opt-in, current, pool not settled: added", mk(nil), vm(xo.PowerStateHalted), false, true, false, true, TaintPlan{AddShutdown: true, AddOutOfService: true, Own: true}},
		{"running, current, pool not settled: keeps", mk(owned, shutdown, oos), vm(xo.PowerStateRunning), false, true, false, true, TaintPlan{}},
		{"running, not current: keeps", mk(owned, shutdown, oos), vm(xo.PowerStateRunning), false, false, false, true, TaintPlan{}},
		{"Ready lifts without VM", mk(owned, shutdown, oos), nil, true, false, false, true, TaintPlan{RemoveShutdown: true, RemoveOutOfService: true, Disown: true}},
		{"no VM, NotReady: nothing", mk(owned, shutdown, oos), nil, false, false, false, true, TaintPlan{}},
		{"unknown power state: nothing", mk(nil, shutdown), vm("Unknown"), false, true, true, true, TaintPlan{}},
		{"person's taint not lifted", mk(nil, shutdown, oos), vm(xo.PowerStateRunning), false, true, true, true, TaintPlan{RemoveShutdown: true}},
		{"person's taint of another effect: not added", mk(nil, humanOOS), vm(xo.PowerStateHalted), false, true, true, true, TaintPlan{AddShutdown: true}},
		{"owned taint lifted by someone, re-added", mk(owned, shutdown), vm(xo.PowerStateHalted), false, true, true, true, TaintPlan{AddOutOfService: true}},
		{"owned taint lifted by someone, opt-out: disown", mk(owned, shutdown), vm(xo.PowerStateHalted), false, true, true, false, TaintPlan{Disown: true}},
		{"suspended keeps owned taint", mk(owned, shutdown, oos), vm(xo.PowerStateSuspended), false, true, true, true, TaintPlan{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := planTaints(tt.n, tt.vm, tt.ready, tt.current, tt.trusted, tt.opt); got != tt.want {
				t.Errorf("planTaints = %+v, want %+v", got, tt.want)
			}
		})
	}
}
