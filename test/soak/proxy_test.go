package soak_test

import (
	"crypto/tls"
	"errors"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// webhookProxy plays the webhook Service: a TCP proxy (TLS passes through, so the API server
// checks the replicas' own self-managed certificates) that sends each new connection to the
// next replica in turn, skipping one that refuses, as kube-proxy sends to the ready endpoints.
// The API server keeps its connections to a webhook alive; a connection that has lived
// maxLife and is idle after a response is closed, so that admissions spread over both
// replicas as new connections do.
type webhookProxy struct {
	l       net.Listener
	targets []string
	next    atomic.Uint64
	conns   []atomic.Int64 // connections sent to each target
	maxLife time.Duration
	wg      sync.WaitGroup
}

// newWebhookProxy listens at once (before the replicas' ports are drawn, so that none is
// drawn twice) and serves once start gives it the targets.
func newWebhookProxy() (*webhookProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &webhookProxy{l: l, maxLife: 2 * time.Second}, nil
}

func (p *webhookProxy) start(targets []string) {
	p.targets, p.conns = targets, make([]atomic.Int64, len(targets))
	p.wg.Add(1)
	go p.serve()
}

func (p *webhookProxy) port() int { return p.l.Addr().(*net.TCPAddr).Port }

func (p *webhookProxy) close() {
	_ = p.l.Close()
	p.wg.Wait()
}

// connsTo returns how many connections went to target i.
func (p *webhookProxy) connsTo(i int) int64 {
	if i >= len(p.conns) {
		return 0
	}
	return p.conns[i].Load()
}

func (p *webhookProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *webhookProxy) handle(c net.Conn) {
	defer c.Close()
	first := int(p.next.Add(1))
	var up net.Conn
	for i := range p.targets {
		idx := (first + i) % len(p.targets)
		u, err := net.DialTimeout("tcp", p.targets[idx], time.Second)
		if err == nil {
			up = u
			p.conns[idx].Add(1)
			break
		}
	}
	if up == nil {
		return // no endpoint: the API server sees the connection closed
	}
	defer up.Close()
	born := time.Now()
	// lastDir: 1 after bytes from the API server, 2 after bytes from the replica.
	var lastDir, lastAt atomic.Int64
	copyDir := func(dst, src net.Conn, dir int64) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				lastDir.Store(dir)
				lastAt.Store(time.Now().UnixNano())
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = dst.Close()
		_ = src.Close()
	}
	done := make(chan struct{}, 2)
	go func() { copyDir(up, c, 1); done <- struct{}{} }()
	go func() { copyDir(c, up, 2); done <- struct{}{} }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			idle := time.Since(time.Unix(0, lastAt.Load()))
			if time.Since(born) > p.maxLife && lastDir.Load() == 2 && idle > 100*time.Millisecond {
				return // the deferred Closes end both copies
			}
		}
	}
}

// apiProxy stands between the binaries and the API server: a TLS reverse proxy that forwards
// with the test's credentials, and can answer 429 (API priority and fairness throttling) to a
// share of the requests, or go away (connections cut and refused, as an API server restart).
type apiProxy struct {
	addr   string
	srv    *http.Server
	rp     *httputil.ReverseProxy
	mu     sync.Mutex
	down   bool
	l      net.Listener
	tlsCfg *tls.Config

	throttlePct atomic.Int64
	throttled   atomic.Int64
	requests    atomic.Int64
	conns       sync.Map // net.Conn → struct{}
}

func newAPIProxy(upstream *rest.Config, serving tls.Certificate) (*apiProxy, error) {
	u, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, err
	}
	tr, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = tr
	rp.FlushInterval = -1 // watches stream
	rp.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &apiProxy{addr: l.Addr().String(), rp: rp,
		tlsCfg: &tls.Config{Certificates: []tls.Certificate{serving}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}}
	p.serveOn(l)
	return p, nil
}

func (p *apiProxy) serveOn(l net.Listener) {
	srv := &http.Server{
		Handler:           http.HandlerFunc(p.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnState: func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				p.conns.Store(c, struct{}{})
			case http.StateClosed, http.StateHijacked:
				p.conns.Delete(c)
			}
		},
	}
	p.mu.Lock()
	p.srv, p.l = srv, l
	p.mu.Unlock()
	go func() { _ = srv.Serve(tls.NewListener(l, p.tlsCfg)) }()
}

func (p *apiProxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	if pct := p.throttlePct.Load(); pct > 0 && rand.Int64N(100) < pct {
		p.throttled.Add(1)
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Too many requests, please try again later.","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}`)
		return
	}
	p.rp.ServeHTTP(w, r)
}

// setThrottle makes pct percent of the requests answer 429 (0: none).
func (p *apiProxy) setThrottle(pct int) { p.throttlePct.Store(int64(pct)) }

// goAway closes the listener and every connection (watches included): the binaries see the
// API server gone until comeBack.
func (p *apiProxy) goAway() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return
	}
	p.down = true
	_ = p.srv.Close()
	p.conns.Range(func(k, _ any) bool {
		_ = k.(net.Conn).Close()
		return true
	})
}

// comeBack listens again on the same address.
func (p *apiProxy) comeBack() error {
	p.mu.Lock()
	if !p.down {
		p.mu.Unlock()
		return nil
	}
	p.down = false
	p.mu.Unlock()
	var l net.Listener
	var err error
	for range 200 {
		if l, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if err != nil {
		return errors.Join(errors.New("listen again on "+p.addr), err)
	}
	p.serveOn(l)
	return nil
}

func (p *apiProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.srv.Close()
}
