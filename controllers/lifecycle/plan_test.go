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
		want                    taintPlan
	}{
		{"running, nothing to do", mk(nil), vm(xo.PowerStateRunning), false, true, true, true, taintPlan{}},
		{"halted NotReady", mk(nil), vm(xo.PowerStateHalted), false, true, true, false, taintPlan{addShutdown: true}},
		{"halted NotReady opt-in", mk(nil), vm(xo.PowerStateHalted), false, true, true, true, taintPlan{addShutdown: true, addOutOfService: true, own: true}},
		{"halted NotReady, not current: nothing", mk(nil), vm(xo.PowerStateHalted), false, false, false, false, taintPlan{}},
		{"halted NotReady opt-in, not current: nothing", mk(nil), vm(xo.PowerStateHalted), false, false, false, true, taintPlan{}},
		{"suspended, not current: nothing", mk(nil), vm(xo.PowerStateSuspended), false, false, false, true, taintPlan{}},
		{"owned taint lifted by someone, opt-out, not current: kept owned", mk(owned, shutdown), vm(xo.PowerStateHalted), false, false, false, false, taintPlan{}},
		{"suspended opt-in: shutdown only", mk(nil), vm(xo.PowerStateSuspended), false, true, true, true, taintPlan{addShutdown: true}},
		{"paused", mk(nil), vm(xo.PowerStatePaused), false, true, true, false, taintPlan{addShutdown: true}},
		{"halted Ready: nothing", mk(nil), vm(xo.PowerStateHalted), true, true, true, true, taintPlan{}},
		{"already tainted", mk(owned, shutdown, oos), vm(xo.PowerStateHalted), false, true, true, true, taintPlan{}},
		{"running trusted lifts", mk(owned, shutdown, oos), vm(xo.PowerStateRunning), false, true, true, true, taintPlan{removeShutdown: true, removeOutOfService: true, disown: true}},
		{"halted NotReady opt-in, current, pool not settled: added", mk(nil), vm(xo.PowerStateHalted), false, true, false, true, taintPlan{addShutdown: true, addOutOfService: true, own: true}},
		{"running, current, pool not settled: keeps", mk(owned, shutdown, oos), vm(xo.PowerStateRunning), false, true, false, true, taintPlan{}},
		{"running, not current: keeps", mk(owned, shutdown, oos), vm(xo.PowerStateRunning), false, false, false, true, taintPlan{}},
		{"Ready lifts without VM", mk(owned, shutdown, oos), nil, true, false, false, true, taintPlan{removeShutdown: true, removeOutOfService: true, disown: true}},
		{"no VM, NotReady: nothing", mk(owned, shutdown, oos), nil, false, false, false, true, taintPlan{}},
		{"unknown power state: nothing", mk(nil, shutdown), vm("Unknown"), false, true, true, true, taintPlan{}},
		{"person's taint not lifted", mk(nil, shutdown, oos), vm(xo.PowerStateRunning), false, true, true, true, taintPlan{removeShutdown: true}},
		{"person's taint of another effect: not added", mk(nil, humanOOS), vm(xo.PowerStateHalted), false, true, true, true, taintPlan{addShutdown: true}},
		{"owned taint lifted by someone, re-added", mk(owned, shutdown), vm(xo.PowerStateHalted), false, true, true, true, taintPlan{addOutOfService: true}},
		{"owned taint lifted by someone, opt-out: disown", mk(owned, shutdown), vm(xo.PowerStateHalted), false, true, true, false, taintPlan{disown: true}},
		{"suspended keeps owned taint", mk(owned, shutdown, oos), vm(xo.PowerStateSuspended), false, true, true, true, taintPlan{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := planTaints(tt.n, tt.vm, tt.ready, tt.current, tt.trusted, tt.opt); got != tt.want {
				t.Errorf("planTaints = %+v, want %+v", got, tt.want)
			}
		})
	}
}
