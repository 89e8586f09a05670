// Package node holds the pure functions that the admission webhook and the controllers share:
// the providerID format, node-to-VM resolution against an inventory snapshot, the desired
// labels and taints for a VM, the label and taint ownership rules, and the node addresses.
//
// Nothing here performs I/O, logs, or keeps state: every function computes its answer from its
// arguments, so the webhook and the controllers reach the same answer for the same inputs.
package node
