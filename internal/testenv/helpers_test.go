package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/xosim"
)

func TestNodeName(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range []struct {
		name, suffix string
		want         *regexp.Regexp
	}{
		{"plain", "", regexp.MustCompile(`^testnodename-plain-\d+$`)},
		{"With Spaces_and/UPPER", "w", regexp.MustCompile(`^testnodename-with-spaces-and-upper-w-\d+$`)},
		{strings.Repeat("long-", 20), "x", regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}-x-\d+$`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 {
				got := NodeName(t, tc.suffix)
				if !tc.want.MatchString(got) {
					t.Errorf("NodeName = %q, want %s", got, tc.want)
				}
				if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
					t.Errorf("NodeName = %q is no Node name: %v", got, errs)
				}
				if seen[got] {
					t.Errorf("NodeName = %q twice", got)
				}
				seen[got] = true
			}
		})
	}
}

func TestCAIssue(t *testing.T) {
	ca := NewCA(t, "test-ca")
	other := NewCA(t, "other-ca")
	for _, tc := range []struct {
		name      string
		hosts     []string
		verify    string
		roots     *x509.CertPool
		wantError bool
	}{
		{"default hosts, IP", nil, "127.0.0.1", ca.Pool(), false},
		{"default hosts, localhost", nil, "localhost", ca.Pool(), false},
		{"IP only, localhost refused", []string{"127.0.0.1"}, "localhost", ca.Pool(), true},
		{"DNS name", []string{"webhook.example"}, "webhook.example", ca.Pool(), false},
		{"another CA", nil, "127.0.0.1", other.Pool(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crt, key := ca.Issue(t, 42, tc.hosts...)
			pair, err := tls.X509KeyPair(crt, key)
			if err != nil {
				t.Fatal(err)
			}
			if pair.Leaf.SerialNumber.Int64() != 42 {
				t.Errorf("serial %d, want 42", pair.Leaf.SerialNumber.Int64())
			}
			_, err = pair.Leaf.Verify(x509.VerifyOptions{DNSName: tc.verify, Roots: tc.roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			if (err != nil) != tc.wantError {
				t.Errorf("verify %s: %v, want error %v", tc.verify, err, tc.wantError)
			}
		})
	}
}

func TestCertDirAndServedSerial(t *testing.T) {
	ca := NewCA(t, "test-ca")
	dir := ca.CertDir(t, 7)
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	addr := FreeAddr(t)
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: time.Second, TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}
	go func() { _ = srv.ListenAndServeTLS("", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	WaitFor(t, 5*time.Second, "the server", func() error {
		s, err := ServedSerial(addr, ca.Pool())
		if err == nil && s != 7 {
			t.Fatalf("served serial %d, want 7", s)
		}
		return err
	})
	if _, err := ServedSerial(addr, NewCA(t, "other").Pool()); err == nil {
		t.Error("ServedSerial verified the certificate against another CA")
	}
}

func TestWriteSecretVolume(t *testing.T) {
	dir := t.TempDir()
	for gen, content := range []string{"first", "second", "third"} {
		WriteSecretVolume(t, dir, gen+1, map[string][]byte{"tls.crt": []byte(content + "-crt"), "tls.key": []byte(content + "-key")})
		for _, name := range []string{"tls.crt", "tls.key"} {
			p := filepath.Join(dir, name)
			if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("%s is not a symlink: %v", name, err)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if want := content + "-" + strings.TrimPrefix(name, "tls."); string(b) != want {
				t.Errorf("generation %d: %s = %q, want %q", gen+1, name, b, want)
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		// ..data, one timestamped folder, two symlinks: the previous folder is gone.
		if len(entries) != 4 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("generation %d: folder holds %q, want ..data, one generation and two keys", gen+1, names)
		}
	}
}

func TestXOCloseReopen(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[useTLS], func(t *testing.T) {
			x := NewXO(t, XOOptions{TLS: useTLS, Client: xo.Options{Retries: -1}})
			pool := x.AddPool(t, xosim.PoolSpec{NameLabel: "pool-a"})
			if !strings.HasPrefix(x.URL, map[bool]string{false: "http://", true: "https://"}[useTLS]) {
				t.Errorf("URL %s", x.URL)
			}
			get := func() error {
				_, err := x.Client.GetPool(t.Context(), pool)
				return err
			}
			if err := get(); err != nil {
				t.Fatalf("before Close: %v", err)
			}
			x.Close()
			if err := get(); err == nil {
				t.Fatal("XO answered after Close")
			}
			x.Reopen(t)
			if err := get(); err != nil {
				t.Fatalf("after Reopen: %v", err)
			}
			if useTLS {
				// Only the CA makes the certificate trusted.
				resp, err := http.Get(x.URL + "/rest/v0/pools") //nolint:gosec // loopback test server
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					t.Error("XO's certificate verified against the system roots")
				} else if !errors.As(err, new(x509.UnknownAuthorityError)) {
					t.Errorf("GET with the system roots: %v, want an unknown authority", err)
				}
			}
		})
	}
}

func TestRecorder(t *testing.T) {
	r := &Recorder{}
	a := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a"}}
	b := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	r.Eventf(a, nil, corev1.EventTypeNormal, "Up", "Do", "%s is %d", "a", 1)
	r.Eventf(a, nil, corev1.EventTypeWarning, "Down", "Do", "no args")
	r.Eventf(b, nil, corev1.EventTypeNormal, "Up", "Do", "b")
	if got := r.Find("a", "Up"); len(got) != 1 || got[0] != (Event{Object: "a", UID: "uid-a", Type: corev1.EventTypeNormal, Reason: "Up", Action: "Do", Note: "a is 1"}) {
		t.Errorf("Find(a, Up) = %+v", got)
	}
	if got := r.All("a"); len(got) != 2 || got[1].Reason != "Down" {
		t.Errorf("All(a) = %+v", got)
	}
	if got := r.Find("c", "Up"); len(got) != 0 {
		t.Errorf("Find(c, Up) = %+v", got)
	}
	if got := r.Invalid(); len(got) != 0 {
		t.Errorf("valid events reported invalid: %v", got)
	}
	r.Eventf(a, nil, "Bad", "", "", "%s", strings.Repeat("x", 1025))
	if got := r.Invalid(); len(got) != 4 {
		t.Errorf("Invalid() = %q, want the type, the reason, the action and the note", got)
	}
}

// TestFreeLoopbackAddr: the ports are below the kernel's ephemeral range, never handed out
// twice, and free.
func TestFreeLoopbackAddr(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		addr := FreeAddr(t)
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, port, _ := net.SplitHostPort(addr)
		if p, _ := strconv.Atoi(port); p < portsFrom || p >= ephemeralLow() {
			t.Fatalf("port %d outside [%d, %d)", p, portsFrom, ephemeralLow())
		}
	}
	l, err := net.Listen("tcp", FreeAddr(t))
	if err != nil {
		t.Fatalf("the address is not free: %v", err)
	}
	l.Close()
}
