package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/nodeevents"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// benchEstate returns an Estate of one XO holding n VMs spread over 4 pools of 8 hosts, and
// the VM ids.
func benchEstate(b testing.TB, n int) (*inventory.Estate, []string) {
	b.Helper()
	x := testenv.NewXO(b, testenv.XOOptions{})
	var specs []xosim.VMSpec
	for p := range 4 {
		pool := x.AddPool(b, xosim.PoolSpec{NameLabel: fmt.Sprintf("pool-%d", p)})
		var hosts []string
		for h := range 8 {
			hosts = append(hosts, x.AddHost(b, xosim.HostSpec{PoolID: pool, NameLabel: fmt.Sprintf("host-%d-%d", p, h)}))
		}
		for i := range n / 4 {
			specs = append(specs, xosim.VMSpec{PoolID: pool, HostID: hosts[i%8], NameLabel: fmt.Sprintf("vm-%d-%d", p, i),
				CPUs: 4, Memory: 8 * xosim.GiB, IPs: []string{fmt.Sprintf("10.%d.%d.%d", p, i/250, i%250+1)}, Tags: []string{"k8s.xenorchestra/label:tag.k8s.xenorchestra/env=prod"}})
		}
	}
	ids, err := x.Sim.AddVMs(specs)
	if err != nil {
		b.Fatal(err)
	}
	x.StartInventory(b, inventory.Options{DisableEventStream: true, Log: logr.Discard()})
	return testenv.Estate(x), ids
}

type discardRecorder struct{}

func (discardRecorder) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {
}

var _ events.EventRecorder = discardRecorder{}

// admissionRequest is the AdmissionReview request the API server sends for a kubelet's Node.
func admissionRequest(b testing.TB, name, systemUUID string) admission.Request {
	b.Helper()
	n := testenv.KubeletNode(name, testenv.WithSystemUUID(systemUUID), testenv.WithNodeIP("192.0.2.10"))
	n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
	raw, err := json.Marshal(n)
	if err != nil {
		b.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       types.UID("0b4b0a8e-9a9c-4b23-9b41-5c1e1b2d3c4e"),
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
		Name:      name,
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
	}}
}

func newHandler(e *inventory.Estate) *admission.Webhook {
	d := &webhook.NodeDefaulter{
		Estate: e, Events: nodeevents.New(discardRecorder{}, "webhook", nil),
		Labels:     node.LabelOptions{TagLabelPrefixes: []string{"tag.k8s.xenorchestra/"}},
		Initialize: true,
	}
	return d.Webhook()
}

// percentiles reports p50 and p99 of the recorded durations as benchmark metrics.
func percentiles(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkAdmissionHandler measures one admission as controller-runtime's typed defaulter
// runs it: decode the Node, resolve its VM from memory, describe it, build the JSON patch.
func BenchmarkAdmissionHandler(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("vms=%d", n), func(b *testing.B) {
			e, ids := benchEstate(b, n)
			h := newHandler(e)
			reqs := make([]admission.Request, 256)
			for i := range reqs {
				reqs[i] = admissionRequest(b, fmt.Sprintf("node-%d", i), ids[(i*37)%len(ids)])
			}
			ctx := context.Background()
			durations := make([]time.Duration, 0, b.N)
			patchBytes := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				resp := h.Handle(ctx, reqs[i%len(reqs)])
				durations = append(durations, time.Since(start))
				if !resp.Allowed || len(resp.Patch) == 0 {
					b.Fatalf("not mutated: %+v", resp.Result)
				}
				patchBytes = len(resp.Patch)
			}
			percentiles(b, durations)
			b.ReportMetric(float64(patchBytes), "patch-B")
		})
	}
}

// BenchmarkAdmissionHTTPS measures the full HTTPS round trip to controller-runtime's webhook
// server under 64 concurrent clients, with 10,000 VMs in the inventory.
func BenchmarkAdmissionHTTPS(b *testing.B) {
	e, ids := benchEstate(b, 10000)
	ca := testenv.NewCA(b, "bench-ca")
	srv := testenv.ServeWebhook(b, ca.CertDir(b, 2, "127.0.0.1"), newHandler(e))
	bodies := make([][]byte, 256)
	for i := range bodies {
		req := admissionRequest(b, fmt.Sprintf("node-%d", i), ids[(i*37)%len(ids)])
		review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req.AdmissionRequest}
		var err error
		if bodies[i], err = json.Marshal(review); err != nil {
			b.Fatal(err)
		}
	}
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 64, ForceAttemptHTTP2: true,
	}}
	url := srv.URL()
	var mu sync.Mutex
	var durations []time.Duration
	b.SetParallelism(32) // 32 × GOMAXPROCS(2) = 64 concurrent clients
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var local []time.Duration
		i := 0
		for pb.Next() {
			start := time.Now()
			resp, err := client.Post(url, "application/json", bytes.NewReader(bodies[i%len(bodies)]))
			if err != nil {
				b.Error(err)
				return
			}
			var review admissionv1.AdmissionReview
			err = json.NewDecoder(resp.Body).Decode(&review)
			resp.Body.Close()
			if err != nil || review.Response == nil || !review.Response.Allowed || len(review.Response.Patch) == 0 {
				b.Errorf("bad answer: %v %+v", err, review.Response)
				return
			}
			local = append(local, time.Since(start))
			i++
		}
		mu.Lock()
		durations = append(durations, local...)
		mu.Unlock()
	})
	b.ReportMetric(float64(len(durations))/b.Elapsed().Seconds(), "req/s")
	percentiles(b, durations)
}
