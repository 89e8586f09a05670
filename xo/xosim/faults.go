package xosim

import (
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FaultKind selects what a Fault does.
type FaultKind int

const (
	// FaultLatency delays matching requests by Fault.Latency before handling them normally.
	FaultLatency FaultKind = iota + 1
	// FaultStatus answers matching requests with Fault.Status and an XO-style JSON error body
	// {"error": Fault.Message}. Status 401 gives XO's exact invalid-credentials answer.
	FaultStatus
	// FaultReset closes the connection without any response.
	FaultReset
	// FaultUnauthorized answers 401 {"error":"invalid credentials"} with
	// WWW-Authenticate: Basic realm="xo", as for a revoked token.
	FaultUnauthorized
	// FaultTruncate cuts the response body: an ndjson listing stops in the middle of the line
	// after Fault.Lines complete lines (or after the last line), a JSON body after half its
	// bytes; then the connection is dropped, so the client sees an unexpected EOF.
	FaultTruncate
	// FaultStall makes matching event streams (GET /rest/v0/events) send nothing at all, not
	// even pings, while the fault is active; it applies to streams already open too. Events
	// keep being queued (and a stream whose queue exceeds Options.MaxEventBuffer is cut, as
	// XO cuts slow consumers); when the fault ends the queue is delivered. Count is ignored.
	FaultStall
	// FaultTrickle sends the body of matching responses one byte every Fault.Latency, after
	// the headers: a slow-loris server that never finishes a listing in time.
	FaultTrickle
	// FaultRepeat makes matching ndjson listings send every object twice in a row, the second
	// copy with its name_label replaced by "duplicate", as older XO versions repeated entries.
	FaultRepeat
)

// Fault is a fault injection rule. A request matches when its path starts with PathPrefix
// (and its method equals Method, when set).
type Fault struct {
	Kind FaultKind
	// Method restricts the rule to one HTTP method; empty matches all.
	Method string
	// PathPrefix is matched against the request path without query, e.g. "/rest/v0/vms".
	// Empty matches every path.
	PathPrefix string
	// Count is how many matching requests the rule affects before it expires; 0 is unlimited.
	Count int
	// Duration is how long the rule stays active after injection; 0 is until removed.
	Duration time.Duration
	// Latency is the delay of a FaultLatency rule, and the delay between bytes of a
	// FaultTrickle rule.
	Latency time.Duration
	// Status and Message are the answer of a FaultStatus rule. Message defaults to the
	// lower-case status text ("service unavailable").
	Status  int
	Message string
	// Lines is the number of complete ndjson lines a FaultTruncate rule lets through.
	Lines int
}

// FaultID identifies an injected fault.
type FaultID int

type faultRule struct {
	id      FaultID
	f       Fault
	expires time.Time // zero: no expiry
	used    int
}

func (r *faultRule) active(now time.Time) bool {
	if !r.expires.IsZero() && !now.Before(r.expires) {
		return false
	}
	return r.f.Count <= 0 || r.used < r.f.Count
}

func (r *faultRule) matches(method, path string) bool {
	return (r.f.Method == "" || strings.EqualFold(r.f.Method, method)) && strings.HasPrefix(path, r.f.PathPrefix)
}

type faultSet struct {
	mu     sync.Mutex
	nextID FaultID
	rules  []*faultRule
}

// faultAction is what the faults say about one request.
type faultAction struct {
	latency       time.Duration
	terminal      *Fault
	truncateLines int // -1: no truncation
	trickle       time.Duration
	repeat        bool
}

// match consumes one use of each matching rule (latency rules, then the first terminal or
// truncation rule) and returns what to do.
func (fs *faultSet) match(method, path string, now time.Time) faultAction {
	act := faultAction{truncateLines: -1}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.expire(now)
	decided := false
	for _, r := range fs.rules {
		if !r.active(now) || !r.matches(method, path) {
			continue
		}
		switch r.f.Kind {
		case FaultLatency:
			act.latency += r.f.Latency
			r.used++
		case FaultStatus, FaultReset, FaultUnauthorized:
			if !decided {
				f := r.f
				act.terminal = &f
				decided = true
				r.used++
			}
		case FaultTrickle:
			act.trickle = r.f.Latency
			r.used++
		case FaultRepeat:
			act.repeat = true
			r.used++
		case FaultTruncate:
			if !decided {
				act.truncateLines = max(r.f.Lines, 0)
				decided = true
				r.used++
			}
		}
	}
	return act
}

// stalled reports whether an active stall rule matches path.
func (fs *faultSet) stalled(path string, now time.Time) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, r := range fs.rules {
		if r.f.Kind == FaultStall && r.active(now) && r.matches(http.MethodGet, path) {
			return true
		}
	}
	return false
}

func (fs *faultSet) expire(now time.Time) {
	fs.rules = slices.DeleteFunc(fs.rules, func(r *faultRule) bool { return !r.active(now) })
}

// InjectFault adds a fault rule and returns its id.
func (s *Server) InjectFault(f Fault) FaultID {
	fs := &s.faults
	fs.mu.Lock()
	fs.nextID++
	r := &faultRule{id: fs.nextID, f: f}
	if f.Duration > 0 {
		r.expires = s.now().Add(f.Duration)
	}
	fs.rules = append(fs.rules, r)
	fs.mu.Unlock()
	s.events.wakeAll()
	return r.id
}

// RemoveFault removes one fault rule.
func (s *Server) RemoveFault(id FaultID) {
	fs := &s.faults
	fs.mu.Lock()
	fs.rules = slices.DeleteFunc(fs.rules, func(r *faultRule) bool { return r.id == id })
	fs.mu.Unlock()
	s.events.wakeAll()
}

// ClearFaults removes every fault rule.
func (s *Server) ClearFaults() {
	fs := &s.faults
	fs.mu.Lock()
	fs.rules = nil
	fs.mu.Unlock()
	s.events.wakeAll()
}

func (s *Server) applyTerminalFault(w *countingWriter, r *http.Request, f *Fault) {
	rq := &request{w: w, r: r, s: s, truncateLines: -1}
	switch f.Kind {
	case FaultReset:
		abortConnection(w, true)
	case FaultUnauthorized:
		rq.invalidCredentials()
	case FaultStatus:
		status := f.Status
		if status < 100 || status > 999 {
			status = http.StatusInternalServerError
		}
		if status == http.StatusUnauthorized && f.Message == "" {
			rq.invalidCredentials()
			return
		}
		msg := f.Message
		if msg == "" {
			msg = strings.ToLower(http.StatusText(status))
		}
		rq.writeError(status, msg, nil)
	}
}

// abortConnection flushes what was written and closes the connection without finishing the
// response: with reset, a TCP reset (connection reset by peer), else a plain close (the
// client sees an unexpected EOF). With HTTP/1 it hijacks the connection; where hijacking is
// not possible (HTTP/2) it aborts the handler with http.ErrAbortHandler, which net/http turns
// into a stream reset.
func abortConnection(w http.ResponseWriter, reset bool) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0) // send a reset rather than a clean close.
	}
	_ = conn.Close()
}

// --- request counters ------------------------------------------------------------------------

type counter struct {
	requests atomic.Int64
	bytes    atomic.Int64
}

type counters struct {
	mu sync.RWMutex
	m  map[string]*counter
}

// request counts a request and returns the byte counter for its response.
func (c *counters) request(key string) *atomic.Int64 {
	c.mu.RLock()
	ct := c.m[key]
	c.mu.RUnlock()
	if ct == nil {
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]*counter{}
		}
		if ct = c.m[key]; ct == nil {
			ct = &counter{}
			c.m[key] = ct
		}
		c.mu.Unlock()
	}
	ct.requests.Add(1)
	return &ct.bytes
}

// RequestCount returns how many requests were made with this method and path (without query)
// since the last ResetCounters, e.g. RequestCount("GET", "/rest/v0/vms").
func (s *Server) RequestCount(method, path string) int64 {
	s.counters.mu.RLock()
	defer s.counters.mu.RUnlock()
	if ct := s.counters.m[method+" "+path]; ct != nil {
		return ct.requests.Load()
	}
	return 0
}

// RequestCounts returns every request count, keyed "METHOD /path".
func (s *Server) RequestCounts() map[string]int64 {
	s.counters.mu.RLock()
	defer s.counters.mu.RUnlock()
	out := make(map[string]int64, len(s.counters.m))
	for k, ct := range s.counters.m {
		out[k] = ct.requests.Load()
	}
	return out
}

// BytesWritten returns the response body bytes written (after compression) for this method
// and path since the last ResetCounters.
func (s *Server) BytesWritten(method, path string) int64 {
	s.counters.mu.RLock()
	defer s.counters.mu.RUnlock()
	if ct := s.counters.m[method+" "+path]; ct != nil {
		return ct.bytes.Load()
	}
	return 0
}

// ResetCounters sets every request and byte counter back to zero.
func (s *Server) ResetCounters() {
	s.counters.mu.Lock()
	defer s.counters.mu.Unlock()
	for _, ct := range s.counters.m {
		ct.requests.Store(0)
		ct.bytes.Store(0)
	}
}
