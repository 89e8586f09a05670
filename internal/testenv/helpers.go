package testenv

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/util/wait"
)

// FreeLoopbackAddr returns 127.0.0.1:port with a TCP port that is free now, for a server the
// test starts later (often another process, which binds it by number).
//
// Not a port from listening on :0: the kernel hands those out of its ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), as it does the source port of every outgoing
// connection and the ports envtest's own servers take, so a port taken that way and released
// is soon taken again; with the test packages running in parallel a controller's
// health port was ("bind: address already in use"). The port is drawn at random below that
// range (from portsFrom), checked by binding it, and never handed out twice by this process.
func FreeLoopbackAddr() (string, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	lo, hi := portsFrom, ephemeralLow()
	for range 1000 {
		p := lo + rand.IntN(hi-lo)
		if handedOut[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		handedOut[p] = true
		return l.Addr().String(), nil
	}
	return "", fmt.Errorf("find a free port: none free among 1000 tries in [%d, %d)", lo, hi)
}

// portsFrom is the lowest port FreeLoopbackAddr hands out: above the ports of the services a
// test host may run (the kubelet's 10250, ...).
const portsFrom = 15000

var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{}
)

// ephemeralLow returns the lowest port of the kernel's ephemeral range (Linux's default 32768
// when it cannot be read, or when it leaves too little room below it).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo > portsFrom+1000 {
				return lo
			}
		}
	}
	return 32768
}

// FreeAddr is FreeLoopbackAddr for a test, which it fails on error.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// FreePort returns a loopback TCP port that is free now (FreeLoopbackAddr).
func FreePort(t testing.TB) int {
	t.Helper()
	_, port, err := net.SplitHostPort(FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a process's stdout and stderr, a
// logger) and readers.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of what was written.
func (b *SyncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// String returns what was written.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Len returns how many bytes were written.
func (b *SyncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// Poll calls cond every 10 ms until it holds (true) or the timeout passes (false).
func Poll(timeout time.Duration, cond func() bool) bool {
	return wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil }) == nil
}

// Eventually polls cond every 10 ms and fails the test unless it holds within timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// WaitFor calls cond every 100 ms until it returns nil, and fails the test with the last
// error cond returned unless that happens within timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	var last error
	if wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	}) != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, last)
	}
}

var (
	nodeSeq atomic.Int64
	nonName = regexp.MustCompile(`[^a-z0-9-]+`)
)

// NodeName returns a Node name unique in the test binary, made of the end of the test's
// name, suffix (when not empty) and a sequence number: tests sharing one API server do not
// see each other's Nodes.
func NodeName(t testing.TB, suffix string) string {
	s := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(s) > 40 {
		s = strings.Trim(s[len(s)-40:], "-")
	}
	if suffix != "" {
		s += "-" + suffix
	}
	return fmt.Sprintf("%s-%d", s, nodeSeq.Add(1))
}

// testLogger returns a logger writing to the test's log.
func testLogger(t testing.TB) logr.Logger {
	return testr.NewWithInterface(t, testr.Options{})
}
