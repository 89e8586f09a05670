package testenv

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/webhook"
)

// WebhookServer is a controller-runtime webhook server that ServeWebhook runs.
type WebhookServer struct {
	// Addr is the server's loopback host:port.
	Addr string
	done chan struct{}
	err  error
}

// ServeWebhook runs a controller-runtime webhook server on a free loopback port with the
// certificate in certDir (tls.crt and tls.key, reloaded when they change), h at webhook.Path,
// until the test ends; it fails the test if the server does not start within 20 s or stops
// with an error.
func ServeWebhook(t testing.TB, certDir string, h http.Handler) *WebhookServer {
	t.Helper()
	port := FreePort(t)
	srv := ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir})
	srv.Register(webhook.Path, h)
	s := &WebhookServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { defer close(s.done); s.err = srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-s.done
		if s.err != nil {
			t.Errorf("webhook server: %v", s.err)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for srv.StartedChecker()(&http.Request{}) != nil {
		if time.Now().After(deadline) {
			t.Fatal("webhook server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

// URL returns the https URL of the webhook.
func (s *WebhookServer) URL() string { return "https://" + s.Addr + webhook.Path }

// Stopped reports whether the server stopped before the test ended, and with what error.
func (s *WebhookServer) Stopped() (bool, error) {
	select {
	case <-s.done:
		return true, s.err
	default:
		return false, nil
	}
}
