package diagnose

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/cmd/app"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/internal/testenv"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
)

// fakeRelease is what the chart installs, made by hand on the API server: there is no kubelet
// or controller-manager behind it, so the test sets what check reads (the Deployment's status,
// the Pods' phase, the EndpointSlice, the Lease).
type fakeRelease struct {
	ns, name string
}

// releaseOptions configure installRelease.
type releaseOptions struct {
	// config is the XO config file, and token the content of the token Secret its tokenFile
	// names.
	config, token string
	// available sets the Deployment's Available condition.
	available bool
}

const (
	configDir = "/etc/xenorchestra-cloud-controller-manager/config"
	tokensDir = "/etc/xenorchestra-cloud-controller-manager/xo-tokens"
)

// installRelease makes the chart's Secrets and Deployment (two replicas, self-managed webhook
// certificates, the config in a Secret whose tokenFile is in another Secret, as the chart's
// tokenSecretRef renders it), its two Pods Running, and the webhook's Service, as the chart does.
func installRelease(t *testing.T, ns string, o releaseOptions) *fakeRelease {
	t.Helper()
	ctx := context.Background()
	r := &fakeRelease{ns: namespace(t, ns), name: "xoccm"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: testenv.ReleaseLabels(r.name)}
	}
	create(t, &corev1.Secret{ObjectMeta: meta("xoccm-config"), StringData: map[string]string{"config.yaml": o.config}})
	create(t, &corev1.Secret{ObjectMeta: meta("xo-token"), StringData: map[string]string{"token": o.token + "\n"}})
	d := testenv.ChartDeployment(ns, r.name, []string{"--config=" + configDir + "/config.yaml", "--webhook-certs=self-managed",
		"--webhook-ca-secret=" + ns + "/xoccm-webhook-ca", "--webhook-dns-names=xoccm-webhook." + ns + ".svc",
		"--webhook-configuration=xoccm", "--leader-elect=true", "--leader-elect-namespace=" + ns},
		map[string]string{"xoccm-config": configDir, "xo-token": tokensDir + "/xo-token"})
	create(t, d)
	if err := testenv.SetDeploymentAvailable(ctx, env.Client, d, o.available); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		p := testenv.RunningPod(d, fmt.Sprintf("xoccm-%d", i))
		if err := testenv.CreateRunningPod(ctx, env.Client, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), p) })
	}
	create(t, &corev1.Service{ObjectMeta: meta("xoccm-webhook"), Spec: corev1.ServiceSpec{
		Selector: d.Spec.Selector.MatchLabels,
		Ports:    []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromString("webhook")}},
	}})
	return r
}

// endpoint adds the webhook Service's EndpointSlice: one ready endpoint at addr, without a Pod
// (check dials it directly).
func (r *fakeRelease) endpoint(t *testing.T, addr string) {
	t.Helper()
	host, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	create(t, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "xoccm-webhook-1", Namespace: r.ns, Labels: map[string]string{discoveryv1.LabelServiceName: "xoccm-webhook"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port))}},
	})
}

// podEndpoint adds an EndpointSlice of the webhook Service with one ready endpoint, the Pod
// pod (check reaches it through a port-forward, which needs a kubelet).
func (r *fakeRelease) podEndpoint(t *testing.T, pod string) {
	t.Helper()
	create(t, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "xoccm-webhook-pod", Namespace: r.ns, Labels: map[string]string{discoveryv1.LabelServiceName: "xoccm-webhook"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: r.ns, Name: pod}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(9443))}},
	})
}

// webhookConfiguration installs the chart's MutatingWebhookConfiguration with caBundle.
func (r *fakeRelease) webhookConfiguration(t *testing.T, caBundle []byte) {
	t.Helper()
	path := webhook.Path
	mwc := webhook.Configuration("xoccm", &admissionregistrationv1.ServiceReference{Name: "xoccm-webhook", Namespace: r.ns, Path: &path, Port: ptr.To[int32](443)},
		admissionregistrationv1.Ignore, 5)
	mwc.Webhooks[0].ClientConfig.CABundle = caBundle
	create(t, mwc)
}

// lease makes the leader-election Lease, held by holder and renewed at renewed.
func (r *fakeRelease) lease(t *testing.T, holder string, renewed time.Time) {
	t.Helper()
	create(t, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: app.LeaseName, Namespace: r.ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: renewed}}})
}

// TestCheckRelease: after the install, check finds the release, reads its config from its
// Secrets with the user's permissions, and reports what keeps Nodes from being described at
// their creation or initialized, each with its fix: the Deployment not available, the webhook
// Service without endpoints, a caBundle that does not verify the certificate served, no
// leader; and that the API server's dry-run Node CREATE comes back undescribed.
func TestCheckRelease(t *testing.T) {
	e := newEstate(t, testenv.XOOptions{})
	e.vm(t, "release-vm")
	const token = "releaseTokenReleaseToken0123456789abcdefXYZ"
	e.Sim.AddToken(token)
	kc := kubeconfig(t)

	t.Run("NotAvailableNoEndpointsNoLeader", func(t *testing.T) {
		r := installRelease(t, "check-release-1", releaseOptions{config: fmt.Sprintf("url: %s\ntokenFile: %s/xo-token/token\n", e.URL, tokensDir), token: token})
		r.webhookConfiguration(t, testenv.NewCA(t, "ca").PEM)
		// Nodes no controller initialized: one whose VM has no address, one complete once described.
		e.vm(t, "release-noip")
		e.vm(t, "release-complete", "10.30.0.1")
		addNode(t, testenv.KubeletNode("release-noip"))
		addNode(t, testenv.KubeletNode("release-complete"))
		res := run(t, nil, "check", "--kubeconfig="+kc)
		if res.code != 1 {
			t.Errorf("exit status %d, want 1", res.code)
		}
		res.line(t, "✔", "release xoccm in namespace check-release-1")
		res.failure(t, "a replica is Ready once XO is listed", "Deployment xoccm is not available (0 of 2 replicas ready")
		res.line(t, "✔", "the release's --config "+configDir+"/config.yaml (Secret check-release-1/xoccm-config): 1 XO server(s)")
		res.line(t, "✔", "reachable over plain HTTP, token accepted")
		res.failure(t, "no replica is Ready", "Service check-release-1/xoccm-webhook has no ready endpoint")
		res.failure(t, "need get and update on the Lease", "no leader: there is no Lease check-release-1/"+app.LeaseName)
		res.failure(t, "failed calling webhook", "a dry-run Node CREATE came back undescribed")
		res.line(t, "‼", "replica xoccm-0: cannot read its metrics")
		res.failure(t, "an IP address (its guest tools", "release-noip: still uninitialized: it resolves to VM", "by its name", "but lacks status.addresses")
		res.line(t, "‼", "release-complete: still uninitialized although it resolves to VM", "its description is complete")
		res.line(t, "✔", "0 of 2 Nodes initialized")
		if containsToken(res.out, token) {
			t.Error("the output holds the token")
		}
	})

	t.Run("CABundleNotMatchingStaleLease", func(t *testing.T) {
		r := installRelease(t, "check-release-2", releaseOptions{config: fmt.Sprintf("url: %s\ntokenFile: %s/xo-token/token\n", e.URL, tokensDir), token: token, available: true})
		served := testenv.NewCA(t, "served-ca")
		addr := serveTLS(t, served, "xoccm-webhook.check-release-2.svc")
		r.endpoint(t, addr)
		r.podEndpoint(t, "xoccm-1")
		r.webhookConfiguration(t, testenv.NewCA(t, "other-ca").PEM)
		r.lease(t, "xoccm-0_1234", time.Now().Add(-time.Minute))
		res := run(t, nil, "check", "--kubeconfig="+kc)
		res.line(t, "✔", "Deployment xoccm available: 2 of 2 replicas ready")
		res.line(t, "✔", "Service check-release-2/xoccm-webhook has 2 ready endpoint(s)")
		// No kubelet here: the Pod behind the second endpoint cannot be reached.
		if _, fix := res.line(t, "‼", "cannot check the certificate served at Pod xoccm-1", "no port-forward"); !strings.Contains(fix, "pods/portforward") {
			t.Errorf("the port-forward's fix %q does not name the permission", fix)
		}
		res.failure(t, "webhook-ca-injector", "the caBundle does not verify the certificate served at "+hostOf(addr), "for xoccm-webhook.check-release-2.svc", "x509")
		res.failure(t, "need get and update on the Lease", "no leader: the Lease check-release-2/"+app.LeaseName+" was last renewed 1m", "xoccm-0_1234")

		// The caBundle of the CA that issued the served certificate verifies it.
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "xoccm"}, &mwc); err != nil {
			t.Fatal(err)
		}
		mwc.Webhooks[0].ClientConfig.CABundle = served.PEM
		if err := env.Client.Update(context.Background(), &mwc); err != nil {
			t.Fatal(err)
		}
		res = run(t, nil, "check", "--kubeconfig="+kc, "-n", "check-release-2", "--release=xoccm")
		res.line(t, "✔", "the caBundle verifies the certificate served at "+hostOf(addr))
		res.none(t, "✘", "caBundle")
	})
}

// serveTLS serves HTTPS on a non-loopback address of this machine (an EndpointSlice may not
// hold a loopback address) with a certificate ca issues for names, until the test ends, and
// returns host:port.
func serveTLS(t *testing.T, ca *testenv.CA, names ...string) string {
	t.Helper()
	var host string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			host = ip.IP.String()
			break
		}
	}
	if host == "" {
		t.Fatal("this machine has no non-loopback IPv4 address to serve the webhook's endpoint on")
	}
	crt, key := ca.Issue(t, 2, names...)
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", net.JoinHostPort(host, "0"), &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// hostOf returns the host of host:port.
func hostOf(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}

// containsToken reports whether s holds the token or a half of it.
func containsToken(s, token string) bool {
	return strings.Contains(s, token[:len(token)/2]) || strings.Contains(s, token[len(token)/2:])
}
