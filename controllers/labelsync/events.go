package labelsync

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// Event reasons of the controller; it also emits nodeevents.ReasonLabelRejected and
// ReasonLabelConflict.
const (
	// ReasonNodeZoneChanged: the VM now runs on another host (live migration).
	ReasonNodeZoneChanged = "NodeZoneChanged"
	// ReasonNodeRegionChanged (Warning): the VM is now in another pool. Its providerID keeps
	// the old pool: a providerID cannot change.
	ReasonNodeRegionChanged = "NodeRegionChanged"
	// ReasonNodeInstanceTypeChanged: the VM's vCPUs or memory changed.
	ReasonNodeInstanceTypeChanged = "NodeInstanceTypeChanged"
	// ReasonNodeRenamed: the VM's name changed.
	ReasonNodeRenamed = "NodeRenamed"
)

// ActionSync is the action of every event of the controller.
const ActionSync = "SyncLabels"

func (r *Reconciler) eventZoneChanged(n *corev1.Node, oldZone, newZone, oldHost, newHost string) {
	r.events.Normal(n, ReasonNodeZoneChanged, ActionSync,
		"VM moved: zone %s → %s (host %q → %q)", oldZone, newZone, oldHost, newHost)
}

func (r *Reconciler) eventRegionChanged(n *corev1.Node, oldRegion, newRegion string) {
	r.events.Warning(n, ReasonNodeRegionChanged, ActionSync,
		"VM moved to another pool: region %s → %s; the providerID keeps the old pool", oldRegion, newRegion)
}

func (r *Reconciler) eventInstanceTypeChanged(n *corev1.Node, oldType, newType string) {
	r.events.Normal(n, ReasonNodeInstanceTypeChanged, ActionSync,
		"VM resized: instance type %s → %s", oldType, newType)
}

func (r *Reconciler) eventRenamed(n *corev1.Node, oldName, newName string) {
	r.events.Normal(n, ReasonNodeRenamed, ActionSync,
		"VM renamed: %s → %s", oldName, newName)
}

func (r *Reconciler) eventLabelRejected(n *corev1.Node, rj node.Rejection) bool {
	return r.events.LabelRejected(n, ActionSync, rj.String())
}

func (r *Reconciler) eventLabelConflict(n *corev1.Node, key string) bool {
	return r.events.LabelConflict(n, ActionSync, key)
}
