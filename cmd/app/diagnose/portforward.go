package diagnose

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
)

// target is where a replica serves: a Pod's port, reached through a port-forward, or an
// address reached directly (a replica outside the cluster's Pods, or a webhook URL).
type target struct {
	// Name names it in messages: the Pod's name, or the address.
	Name string
	// Namespace, Pod and Port name a Pod's port; Addr, when set, is dialled directly instead.
	Namespace, Pod string
	Port           int32
	Addr           string
}

// tunnel is an open way to a target: Addr is dialled, Close ends it.
type tunnel struct {
	Addr string
	stop func()
	// errs is what the port-forward reported about its connections (a connection the Pod
	// refused), for the error that follows.
	errs *lockedBuffer
}

// Close ends the tunnel.
func (t *tunnel) Close() {
	if t.stop != nil {
		t.stop()
	}
}

// explain adds to err what the port-forward said.
func (t *tunnel) explain(err error) error {
	if t.errs != nil {
		if e := t.errs.String(); e != "" {
			return fmt.Errorf("%w (port-forward: %s)", err, e)
		}
	}
	return err
}

// errTunnel marks a port-forward that could not be opened: the user's permissions (create on
// pods/portforward) or the way from the API server to the kubelet, not the target itself.
var errTunnel = errors.New("no port-forward")

// open opens a way to the target: a port-forward through the API server to a Pod's port, as
// kubectl port-forward does (SPDY over WebSocket, falling back to SPDY), on a free loopback
// port; or nothing for an address dialled directly.
func (s *session) open(ctx context.Context, t target) (*tunnel, error) {
	if t.Addr != "" {
		return &tunnel{Addr: t.Addr}, nil
	}
	tun, err := s.forward(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("%w to Pod %s/%s port %d: %w", errTunnel, t.Namespace, t.Pod, t.Port, err)
	}
	return tun, nil
}

// forward opens the port-forward of open.
func (s *session) forward(ctx context.Context, t target) (*tunnel, error) {
	url := s.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(t.Namespace).Name(t.Pod).SubResource("portforward").URL()
	rt, upgrader, err := spdy.RoundTripperFor(s.rest)
	if err != nil {
		return nil, err
	}
	dialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: rt}, http.MethodPost, url)
	if ws, err := portforward.NewSPDYOverWebsocketDialerForStreaming(url, s.rest); err == nil {
		dialer = portforward.NewFallbackDialerForStreaming(ws, dialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}
	fctx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{})
	errs := &lockedBuffer{}
	fw, err := portforward.NewOnAddressesForStreamingWithContext(fctx, dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(int(t.Port))}, ready, nil, errs)
	if err != nil {
		cancel()
		return nil, err
	}
	// done is closed when the forward ends, with its error in fwErr.
	done := make(chan struct{})
	var fwErr error
	go func() { fwErr = fw.ForwardPorts(); close(done) }()
	select {
	case <-ready:
	case <-done:
		cancel()
		return nil, fwErr
	case <-ctx.Done():
		cancel()
		<-done
		return nil, ctx.Err()
	}
	stop := func() { cancel(); <-done }
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		stop()
		return nil, errors.Join(errors.New("no local port"), err)
	}
	return &tunnel{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))), stop: stop, errs: errs}, nil
}

// lockedBuffer collects what the port-forward reports about its connections (a refused
// connection in the Pod) for the error that follows.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}
