package testenv

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/inventory"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

// DefaultXOToken is the token NewXO accepts when XOOptions.Token is empty.
const DefaultXOToken = "testenv-xo-token-0123456789abcdefghijklmnop"

// XOOptions configures NewXO.
type XOOptions struct {
	// Token is the only token the simulator accepts; default DefaultXOToken.
	Token string
	// PingInterval is the period of the event stream's pings; default the simulator's.
	PingInterval time.Duration
	// TLS serves HTTPS with a certificate for 127.0.0.1 and localhost issued by a fresh CA
	// (XO.CA), which only the test trusts.
	TLS bool
	// Client configures XO.Client; URL and Token are filled in, and with TLS the TLSConfig
	// trusts XO.CA unless set.
	Client xo.Options
	// Host is the address Sim listens on; default 127.0.0.1. The real-node tests serve it on
	// the node's address, which their Pods reach.
	Host string
}

// XO is a simulated Xen Orchestra served on a loopback listener for one test, with a real
// client. Close and Reopen take the listener down and up again on the same address, so that
// a test sees connections refused. Everything stops when the test ends.
type XO struct {
	// Sim is the simulator; tests add pools, hosts and VMs and inject faults through it.
	Sim *xosim.Server
	// Client is a client of Sim.
	Client *xo.Client
	// Inventory is set by StartInventory.
	Inventory *inventory.Inventory
	// URL is where Sim is served (http:// or, with TLS, https://).
	URL string
	// Token is the token Sim accepts.
	Token string
	// CA issued the serving certificate; nil without TLS.
	CA *CA

	addr      string
	tlsConfig *tls.Config
	stream    bool

	mu  sync.Mutex
	srv *http.Server
}

// NewXO starts a simulator on a free loopback port.
func NewXO(t testing.TB, o XOOptions) *XO {
	t.Helper()
	x := &XO{Token: o.Token}
	if x.Token == "" {
		x.Token = DefaultXOToken
	}
	x.Sim = xosim.New(xosim.Options{Tokens: []string{x.Token}, PingInterval: o.PingInterval})
	scheme := "http://"
	if o.TLS {
		x.CA = NewCA(t, "xo-ca")
		crt, key := x.CA.Issue(t, 2, "127.0.0.1", "localhost")
		pair, err := tls.X509KeyPair(crt, key)
		if err != nil {
			t.Fatal(err)
		}
		x.tlsConfig = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		scheme = "https://"
	}
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	x.addr = l.Addr().String()
	x.URL = scheme + x.addr
	x.serve(l)
	t.Cleanup(func() {
		x.Sim.CloseEventStreams()
		x.Close()
	})

	co := o.Client
	co.URL, co.Token = x.URL, x.Token
	if o.TLS && co.TLSConfig == nil {
		co.TLSConfig = &tls.Config{RootCAs: x.CA.Pool(), MinVersion: tls.VersionTLS12}
	}
	if x.Client, err = xo.New(co); err != nil {
		t.Fatal(err)
	}
	return x
}

// serve serves the simulator on l.
func (x *XO) serve(l net.Listener) {
	srv := &http.Server{
		Handler:           x.Sim,
		ReadHeaderTimeout: 5 * time.Second,
		// Refused handshakes and cut connections are what some tests are about.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	if x.tlsConfig != nil {
		srv.TLSConfig = x.tlsConfig.Clone()
	}
	x.mu.Lock()
	x.srv = srv
	x.mu.Unlock()
	if srv.TLSConfig == nil {
		go func() { _ = srv.Serve(l) }()
		return
	}
	// The certificate is in TLSConfig, hence no files.
	go func() { _ = srv.ServeTLS(l, "", "") }()
}

// Close closes the listener and every connection: XO refuses connections until Reopen.
func (x *XO) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.srv != nil {
		_ = x.srv.Close()
		x.srv = nil
	}
}

// Reopen listens again on the address Close gave up, retrying while the port is busy.
func (x *XO) Reopen(t testing.TB) {
	t.Helper()
	var l net.Listener
	var err error
	for range 100 {
		if l, err = net.Listen("tcp", x.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("listen again on %s: %v", x.addr, err)
	}
	x.serve(l)
}

// TestSettleTime is the settle time StartInventory gives an inventory that sets none: short,
// so that tests do not wait the production default.
const TestSettleTime = 100 * time.Millisecond

// StartInventory starts an inventory on Client with o (default log: the test's; default
// settle time TestSettleTime), stopped when the test ends, and waits until it has synced,
// every connected pool is trusted, and, unless o disables it, its event stream is up.
func (x *XO) StartInventory(t testing.TB, o inventory.Options) *inventory.Inventory {
	t.Helper()
	if o.Log.GetSink() == nil {
		o.Log = testLogger(t)
	}
	if o.SettleTime == 0 {
		o.SettleTime = TestSettleTime
	}
	x.stream = !o.DisableEventStream
	x.Inventory = inventory.New(x.Client, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = x.Inventory.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-x.Inventory.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("inventory did not sync")
	}
	if x.stream {
		Eventually(t, 5*time.Second, "the inventory's event stream up", x.Inventory.Streaming)
	}
	Eventually(t, 5*time.Second+10*o.SettleTime, "the inventory's pools trusted", func() bool {
		if !x.stream {
			_ = x.Inventory.Relist(context.Background())
		}
		return !x.Inventory.Snapshot().Settling()
	})
	return x.Inventory
}

// WaitInventory waits up to 5 s until cond holds for the inventory; without event stream it
// relists first.
func (x *XO) WaitInventory(t testing.TB, what string, cond func(*inventory.Snapshot) bool) {
	t.Helper()
	if !x.stream {
		if err := x.Inventory.Relist(context.Background()); err != nil {
			t.Fatalf("relist: %v", err)
		}
	}
	Eventually(t, 5*time.Second, what, func() bool { return cond(x.Inventory.Snapshot()) })
}

// AddPool adds a pool to the simulator and returns its id.
func (x *XO) AddPool(t testing.TB, spec xosim.PoolSpec) string {
	t.Helper()
	return idOrFatal(t)(x.Sim.AddPool(spec))
}

// AddHost adds a host to the simulator and returns its id.
func (x *XO) AddHost(t testing.TB, spec xosim.HostSpec) string {
	t.Helper()
	return idOrFatal(t)(x.Sim.AddHost(spec))
}

// AddVM adds a VM to the simulator and returns its id.
func (x *XO) AddVM(t testing.TB, spec xosim.VMSpec) string {
	t.Helper()
	return idOrFatal(t)(x.Sim.AddVM(spec))
}

// idOrFatal returns a function that returns id, or fails t with err.
func idOrFatal(t testing.TB) func(id string, err error) string {
	return func(id string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
}

// Estate returns the Estate of these simulators' inventories (started with StartInventory),
// in this order, with the default lookup timeout.
func Estate(xos ...*XO) *inventory.Estate {
	members := make([]inventory.Member, len(xos))
	for i, x := range xos {
		members[i] = inventory.Member{Inventory: x.Inventory, XO: x.Client}
	}
	return inventory.NewEstate(0, members...)
}
