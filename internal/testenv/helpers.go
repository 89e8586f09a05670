package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
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

// FreeLoopbackAddr returns 127.0.0.1:port with a TCP port that was free a moment ago.
func FreeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
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

// FreePort returns a loopback TCP port that was free a moment ago.
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
