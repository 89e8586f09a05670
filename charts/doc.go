// Package charts holds the project's Helm chart (xenorchestra-cloud-controller-manager/) and its
// tests: helm lint, rendering of the important value combinations checked against the code the
// chart deploys (flags, webhook configuration, config file format, leader-election Lease), a
// server-side dry run against a real API server with cert-manager's CRDs, the plain manifests
// in docs/deploy kept in sync with the chart, a webhook server reloading a certificate renewed
// the way the kubelet updates the mounted Secret, and the Dockerfile kept in step with
// `make build`.
//
// The tests need the pinned helm, kube-apiserver and etcd of hack/testbin.sh (`make testbin`).
package charts
