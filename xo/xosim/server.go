package xosim

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// BasePath is the REST API's base path.
const BasePath = "/rest/v0"

// Defaults of Options.
const (
	DefaultPingInterval   = 30 * time.Second
	DefaultMaxEventBuffer = 20 << 20
)

// Options configures a Server.
type Options struct {
	// Tokens are the valid authentication tokens (cookie authenticationToken or token).
	Tokens []string
	// BasicAuth maps user names to passwords accepted with HTTP Basic authentication.
	BasicAuth map[string]string
	// PingInterval is the period of the event stream's ping events (XO: 30 s).
	PingInterval time.Duration
	// MaxEventBuffer is how many bytes of events may wait for a slow (or stalled) event stream
	// before the simulator cuts it, as XO cuts slow consumers (default 20 MiB).
	MaxEventBuffer int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// DisableGzip turns off gzip compression of JSON responses (XO compresses JSON bodies of
	// 1 KiB or more when the client accepts gzip).
	DisableGzip bool
}

// String describes the options without the tokens and passwords.
func (o Options) String() string {
	return fmt.Sprintf("xosim.Options{Tokens: %d redacted, BasicAuth: %d users, PingInterval: %v, MaxEventBuffer: %d, DisableGzip: %v}",
		len(o.Tokens), len(o.BasicAuth), o.PingInterval, o.MaxEventBuffer, o.DisableGzip)
}

// GoString is String, so that %#v does not print secrets either.
func (o Options) GoString() string { return o.String() }

// Server simulates XO's REST API. It is an http.Handler and is safe for concurrent use.
type Server struct {
	opts Options
	now  func() time.Time
	st   *store

	authMu sync.RWMutex
	tokens map[string]struct{}
	basic  map[string]string

	faults   faultSet
	counters counters
	events   eventHub
}

// New returns a Server with an empty inventory.
func New(opts Options) *Server {
	if opts.PingInterval <= 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.MaxEventBuffer <= 0 {
		opts.MaxEventBuffer = DefaultMaxEventBuffer
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{
		opts:   opts,
		now:    opts.Now,
		st:     newStore(),
		tokens: map[string]struct{}{},
		basic:  map[string]string{},
	}
	for _, t := range opts.Tokens {
		if t != "" {
			s.tokens[t] = struct{}{}
		}
	}
	for u, p := range opts.BasicAuth {
		s.basic[u] = p
	}
	s.events.init()
	return s
}

// String describes the simulator (never its tokens).
func (s *Server) String() string {
	pools, hosts, vms := s.Counts()
	return fmt.Sprintf("xosim.Server{pools: %d, hosts: %d, VMs: %d}", pools, hosts, vms)
}

// GoString is String, so that %#v does not print secrets either.
func (s *Server) GoString() string { return s.String() }

// --- HTTP entry point --------------------------------------------------------------------

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	cw := &countingWriter{ResponseWriter: w, bytes: s.counters.request(key)}

	act := s.faults.match(r.Method, r.URL.Path, s.now())
	cw.trickle, cw.ctx = act.trickle, r.Context()
	if act.latency > 0 {
		t := time.NewTimer(act.latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if act.terminal != nil {
		s.applyTerminalFault(cw, r, act.terminal)
		return
	}
	rq := &request{w: cw, r: r, s: s, truncateLines: act.truncateLines, repeat: act.repeat}
	s.route(rq)
}

// request carries one request through the handlers.
type request struct {
	w *countingWriter
	r *http.Request
	s *Server
	// authenticated is set by the authentication step (XO's setupApiContext).
	authenticated bool
	// truncateLines >= 0 cuts the response body (see FaultTruncate); -1 when not faulted.
	truncateLines int
	// repeat sends every ndjson object twice (see FaultRepeat).
	repeat bool
}

func (s *Server) route(rq *request) {
	r := rq.r
	segs, ok := splitPath(r.URL.EscapedPath())
	if !ok || len(segs) < 2 || !strings.EqualFold(segs[0], "rest") || !strings.EqualFold(segs[1], "v0") {
		rq.notFound()
		return
	}
	// XO runs its authentication middleware on everything under /rest/v0, routes or not.
	if !s.authenticate(rq) {
		return
	}
	segs = segs[2:]
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	lower := func(i int) string { return strings.ToLower(segs[i]) }
	switch {
	case len(segs) == 0 && method == http.MethodGet:
		rq.w.Header().Set("Location", BasePath+"/docs")
		rq.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rq.w.WriteHeader(http.StatusFound)
		_, _ = rq.w.Write([]byte("Found. Redirecting to " + BasePath + "/docs"))
	case len(segs) == 1 && lower(0) == "ping" && method == http.MethodGet:
		rq.writeJSON(http.StatusOK, kv("result", "pong", "timestamp", float64(s.now().UnixMilli())))
	case len(segs) == 1 && lower(0) == "events" && method == http.MethodGet:
		if rq.requireUser() {
			s.serveEvents(rq)
		}
	case len(segs) == 3 && lower(0) == "events" && lower(2) == "subscriptions" && method == http.MethodPost:
		if rq.requireUser() {
			s.addSubscription(rq, segs[1])
		}
	case len(segs) == 4 && lower(0) == "events" && lower(2) == "subscriptions" && method == http.MethodDelete:
		if rq.requireUser() {
			s.removeSubscription(rq, segs[1], segs[3])
		}
	case len(segs) == 1 && method == http.MethodGet && isCollection(lower(0)):
		if rq.requireUser() {
			s.serveCollection(rq, lower(0))
		}
	case len(segs) == 2 && method == http.MethodGet && isCollection(lower(0)):
		if rq.requireUser() {
			s.serveObject(rq, lower(0), segs[1])
		}
	case len(segs) == 4 && lower(2) == "tags" && (method == http.MethodPut || method == http.MethodDelete):
		coll, ok := xapiCollection(lower(0))
		if !ok {
			rq.notFound()
			return
		}
		if rq.requireUser() {
			s.serveTag(rq, coll, segs[1], segs[3], method == http.MethodPut)
		}
	default:
		rq.notFound()
	}
}

// splitPath splits an escaped path into unescaped segments. A single trailing slash is
// ignored (Express routes are not strict); empty segments elsewhere make no route match.
func splitPath(escaped string) ([]string, bool) {
	if !strings.HasPrefix(escaped, "/") {
		return nil, false
	}
	p := strings.TrimSuffix(escaped[1:], "/")
	if p == "" {
		return nil, true
	}
	raw := strings.Split(p, "/")
	out := make([]string, len(raw))
	for i, seg := range raw {
		if seg == "" {
			return nil, false
		}
		u, err := url.PathUnescape(seg)
		if err != nil {
			return nil, false
		}
		out[i] = u
	}
	return out, true
}

func isCollection(name string) bool {
	switch name {
	case "vms", "hosts", "pools", "servers":
		return true
	}
	return false
}

func xapiCollection(name string) (collection, bool) {
	switch name {
	case "vms":
		return collVM, true
	case "hosts":
		return collHost, true
	case "pools":
		return collPool, true
	}
	return 0, false
}

// --- authentication ------------------------------------------------------------------------

// authenticate is XO's setupApiContext: it rejects malformed or conflicting credentials and
// invalid ones, and records whether the request is authenticated. It returns false when it
// has answered.
func (s *Server) authenticate(rq *request) bool {
	r := rq.r
	token := ""
	if c := cookieValue(r, "authenticationToken"); c != nil {
		token = *c
	} else if c := cookieValue(r, "token"); c != nil {
		token = *c
	}
	authz := r.Header.Get("Authorization")
	hasToken, hasBasic := token != "", authz != ""
	switch {
	case hasToken && hasBasic:
		rq.writeError(http.StatusBadRequest, "Having multiple authentication methods is not supported, please choose one", nil)
		return false
	case hasToken:
		s.authMu.RLock()
		_, ok := s.tokens[token]
		s.authMu.RUnlock()
		if !ok {
			rq.invalidCredentials()
			return false
		}
	case hasBasic:
		parts := strings.Split(authz, " ")
		if len(parts) < 2 {
			rq.writeError(http.StatusBadRequest, "Malformed Authorization header", nil)
			return false
		}
		user, password := decodeBasic(parts[1])
		s.authMu.RLock()
		want, ok := s.basic[user]
		s.authMu.RUnlock()
		if !ok || password == nil || *password != want {
			rq.invalidCredentials()
			return false
		}
	default:
		return true
	}
	rq.authenticated = true
	return true
}

// cookieValue returns the first cookie of that name, nil when absent.
func cookieValue(r *http.Request, name string) *string {
	cs := r.CookiesNamed(name)
	if len(cs) == 0 {
		return nil
	}
	v := cs[0].Value
	if u, err := url.QueryUnescape(strings.ReplaceAll(v, "+", "%2B")); err == nil {
		v = u
	}
	return &v
}

// decodeBasic decodes base64(user:password) as Node does (lenient base64; the password is the
// second ':'-separated part only; nil when there is none).
func decodeBasic(enc string) (string, *string) {
	enc = strings.TrimRight(enc, "=")
	b, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil {
		b, err = base64.RawURLEncoding.DecodeString(enc)
		if err != nil {
			return "", nil
		}
	}
	parts := strings.Split(string(b), ":")
	if len(parts) < 2 {
		return parts[0], nil
	}
	return parts[0], &parts[1]
}

// requireUser answers 401 unless the request is authenticated (routes with security "*").
func (rq *request) requireUser() bool {
	if !rq.authenticated {
		rq.invalidCredentials()
		return false
	}
	return true
}

func (rq *request) invalidCredentials() {
	rq.w.Header().Set("WWW-Authenticate", `Basic realm="xo"`)
	rq.writeError(http.StatusUnauthorized, "invalid credentials", nil)
}

// --- responses -----------------------------------------------------------------------------

// writeError writes XO's error body {"error": message, "data": data}; data is omitted when nil.
func (rq *request) writeError(status int, message any, data any) {
	body := kv("error", message)
	if data != nil {
		body.set("data", data)
	}
	rq.writeJSON(status, body)
}

// writeJSON writes v pretty-printed, as Express's res.json does with XO's settings, gzipped
// when the client accepts it and the body is 1 KiB or more.
func (rq *request) writeJSON(status int, v any) {
	rq.writeJSONBytes(status, marshalPretty(v))
}

func (rq *request) writeJSONBytes(status int, body []byte) {
	h := rq.w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Vary", "Accept-Encoding")
	if !rq.s.opts.DisableGzip && len(body) >= 1024 && acceptsGzip(rq.r) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = buf.Bytes()
		h.Set("Content-Encoding", "gzip")
	}
	if rq.truncateLines >= 0 && len(body) > 1 {
		rq.w.WriteHeader(status)
		_, _ = rq.w.Write(body[:len(body)/2])
		rq.abort()
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	rq.w.WriteHeader(status)
	_, _ = rq.w.Write(body)
}

func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			if q, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// notFound writes Express's default 404 page.
func (rq *request) notFound() {
	msg := "Cannot " + rq.r.Method + " " + html.EscapeString(rq.r.URL.EscapedPath())
	body := "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Error</title>\n</head>\n<body>\n<pre>" +
		msg + "</pre>\n</body>\n</html>\n"
	h := rq.w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	rq.w.WriteHeader(http.StatusNotFound)
	_, _ = rq.w.Write([]byte(body))
}

// abort ends the connection without completing the response (see FaultTruncate).
func (rq *request) abort() {
	abortConnection(rq.w, false)
}

// --- query parameters ----------------------------------------------------------------------

// queryValues parses a query string as Express 5 (node:querystring) does: repeated keys give
// arrays, "+" is a space, undecodable escapes are kept as is.
func queryValues(raw string) map[string][]string {
	out := map[string][]string{}
	if raw == "" {
		return out
	}
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		k, v = qsUnescape(k), qsUnescape(v)
		out[k] = append(out[k], v)
	}
	return out
}

func qsUnescape(s string) string {
	s = strings.ReplaceAll(s, "+", " ")
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// queryParam is one query parameter as TSOA sees it: absent, a string, or an array.
type queryParam struct {
	present bool
	values  []string
}

func (q queryParam) isString() bool { return q.present && len(q.values) == 1 }

// jsString is String(value): arrays are joined with ",".
func (q queryParam) jsString() string { return strings.Join(q.values, ",") }

// rawValue is the value as XO echoes it in a validation error.
func (q queryParam) rawValue() any {
	if q.isString() {
		return q.values[0]
	}
	return strList(q.values)
}

// isFloat is validator.js's isFloat with default options.
func isFloat(s string) bool {
	switch s {
	case "", ".", ",", "-", "+":
		return false
	}
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(s)
}

// jsParseFloat is JavaScript's parseFloat: the longest decimal prefix, NaN when none.
func jsParseFloat(s string) float64 {
	s = strings.TrimLeftFunc(s, isJSWhitespace)
	sign := 1.0
	body := s
	if body != "" && (body[0] == '+' || body[0] == '-') {
		if body[0] == '-' {
			sign = -1
		}
		body = body[1:]
	}
	if strings.HasPrefix(body, "Infinity") {
		return sign * math.Inf(1)
	}
	best := ""
	for end := len(body); end > 0; end-- {
		if isDecimalLiteral(body[:end]) {
			best = body[:end]
			break
		}
	}
	if best == "" {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(best, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return sign * f
		}
		return math.NaN()
	}
	return sign * f
}

// --- collections ---------------------------------------------------------------------------

type listParams struct {
	fields   *string // nil: hrefs only
	ndjson   bool
	markdown bool
	filter   *string
	limit    float64
}

// parseListParams validates the collection query parameters as TSOA does; fieldErrs holds
// XO's 422 details, in parameter order.
func parseListParams(raw string) (listParams, *ordObj) {
	q := queryValues(raw)
	get := func(name string) queryParam {
		v, ok := q[name]
		return queryParam{present: ok, values: v}
	}
	p := listParams{limit: math.Inf(1)}
	errs := newOrdObj(0)
	fieldErr := func(name, msg string, qp queryParam) {
		errs.set(name, kv("message", msg, "value", qp.rawValue()))
	}
	if f := get("fields"); f.present {
		if !f.isString() {
			fieldErr("fields", "invalid string value", f)
		} else {
			p.fields = &f.values[0]
		}
	}
	for _, name := range []string{"ndjson", "markdown"} {
		b := get(name)
		if !b.present {
			continue
		}
		switch strings.ToLower(b.jsString()) {
		case "true", "false":
			// Only the exact string "true" turns the format on (XO compares req.query).
			on := b.isString() && b.values[0] == "true"
			if name == "ndjson" {
				p.ndjson = on
			} else {
				p.markdown = on
			}
		default:
			fieldErr(name, "invalid boolean value", b)
		}
	}
	if f := get("filter"); f.present {
		if !f.isString() {
			fieldErr("filter", "invalid string value", f)
		} else {
			p.filter = &f.values[0]
		}
	}
	if l := get("limit"); l.present {
		if s := l.jsString(); !isFloat(s) {
			fieldErr("limit", "invalid float number", l)
		} else {
			p.limit = jsParseFloat(s)
		}
	}
	if len(errs.keys) > 0 {
		return p, errs
	}
	return p, nil
}

// collectionObjects returns the objects of a REST collection.
func (s *Server) collectionObjects(name string) []*object {
	s.st.mu.RLock()
	defer s.st.mu.RUnlock()
	if name == "servers" {
		var out []*object
		for _, id := range s.st.order[collPool] {
			if p := s.st.pools[id]; p != nil && !p.removed {
				out = append(out, &object{id: p.spec.ServerID, data: s.st.buildServer(p)})
			}
		}
		return out
	}
	coll, _ := xapiCollection(name)
	return s.st.list(coll)
}

func (s *Server) serveCollection(rq *request, name string) {
	p, fieldErrs := parseListParams(rq.r.URL.RawQuery)
	if fieldErrs != nil {
		rq.writeError(http.StatusUnprocessableEntity, fieldErrs, map[string]any{})
		return
	}
	var m *Matcher
	if p.filter != nil {
		var err error
		if m, err = ParseFilter(*p.filter); err != nil {
			rq.writeError(http.StatusBadRequest, err.Error(), kv("stringToParse", *p.filter))
			return
		}
	}
	objs := s.collectionObjects(name)
	if m != nil {
		kept := objs[:0:0]
		for _, o := range objs {
			ok, err := m.Match(o.data)
			if err != nil {
				rq.writeError(http.StatusInternalServerError, err.Error(), nil)
				return
			}
			if ok {
				kept = append(kept, o)
			}
		}
		objs = kept
	}
	// XO decrements the limit per object and stops when it reaches exactly 0, so negative or
	// fractional limits return everything.
	limit := p.limit
	n := 0
	for n < len(objs) && limit != 0 {
		n++
		limit--
	}
	objs = objs[:n]

	if p.ndjson && p.markdown {
		rq.writeError(http.StatusUnprocessableEntity, "Cannot use both ndjson and markdown output formats simultaneously", map[string]any{})
		return
	}
	href := BasePath + "/" + name + "/"
	var pk *picker
	if p.fields != nil && *p.fields != "*" {
		pk = newPicker(parseFields(*p.fields))
	}
	// scratch is reused to build entries, which are then copied at their exact size.
	var scratch []byte
	entry := func(o *object) []byte {
		switch {
		case p.fields == nil:
			return appendString(nil, href+o.id)
		case *p.fields == "*":
			raw := o.json()
			out := make([]byte, 0, len(raw)+len(href)+len(o.id)+12)
			out = append(out, raw[:len(raw)-1]...)
			if len(raw) > 2 {
				out = append(out, ',')
			}
			out = append(out, `"href":`...)
			out = appendString(out, href+o.id)
			return append(out, '}')
		default:
			return o.entry(href+"\x00"+*p.fields, func() []byte {
				scratch = pk.appendEntry(scratch[:0], o.data, href+o.id)
				return bytes.Clone(scratch)
			})
		}
	}
	switch {
	case p.ndjson:
		s.writeNDJSON(rq, objs, entry)
	case p.markdown:
		rq.w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
		rq.w.WriteHeader(http.StatusOK)
		_, _ = rq.w.Write([]byte(markdownTable(objs, entry)))
	default:
		var buf bytes.Buffer
		buf.WriteByte('[')
		for i, o := range objs {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(entry(o))
		}
		buf.WriteByte(']')
		var pretty bytes.Buffer
		pretty.Grow(buf.Len() * 2)
		_ = indentJSON(&pretty, buf.Bytes())
		rq.writeJSONBytes(http.StatusOK, pretty.Bytes())
	}
}

// writeNDJSON streams one compact JSON value per line, flushing as it goes. A truncation fault
// stops mid-line after the configured number of lines and drops the connection.
func (s *Server) writeNDJSON(rq *request, objs []*object, entry func(*object) []byte) {
	rq.w.Header().Set("Content-Type", "application/x-ndjson")
	rq.w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(rq.w)
	var buf []byte
	for i, o := range objs {
		if rq.truncateLines >= 0 && i == rq.truncateLines {
			line := entry(o)
			buf = append(buf, line[:len(line)/2]...)
			_, _ = rq.w.Write(buf)
			rq.abort()
			return
		}
		line := entry(o)
		buf = append(append(buf, line...), '\n')
		if rq.repeat {
			buf = append(append(buf, renamed(line, "duplicate")...), '\n')
		}
		if len(buf) >= 32<<10 {
			if _, err := rq.w.Write(buf); err != nil {
				return
			}
			_ = rc.Flush()
			buf = buf[:0]
		}
	}
	if len(buf) > 0 {
		_, _ = rq.w.Write(buf)
	}
	if rq.truncateLines >= 0 {
		rq.abort()
		return
	}
	_ = rc.Flush()
}

// markdownTable is XO's makeMarkdownTable.
func markdownTable(objs []*object, entry func(*object) []byte) string {
	if len(objs) == 0 {
		return "No results."
	}
	values := make([]any, len(objs))
	for i, o := range objs {
		values[i] = decodeOrdered(entry(o))
	}
	if _, ok := values[0].(string); ok {
		lines := make([]string, len(values))
		for i, v := range values {
			lines[i], _ = v.(string)
		}
		return strings.Join(lines, "\n")
	}
	first, _ := values[0].(*ordObj)
	var headers []string
	if first != nil {
		for _, k := range first.keys {
			if k != "href" {
				headers = append(headers, k)
			}
		}
	}
	cell := func(v any) string {
		var text string
		switch x := v.(type) {
		case nil, undefinedT:
			return ""
		case string:
			text = x
		case *ordObj, []any:
			text = string(appendJSON(nil, x))
		default:
			text = strings.Trim(string(appendJSON(nil, x)), `"`)
		}
		return strings.ReplaceAll(strings.ReplaceAll(text, "|", `\|`), "\n", " ")
	}
	var b strings.Builder
	b.WriteString("| " + strings.Join(headers, " | ") + " |\n")
	seps := make([]string, len(headers))
	for i := range seps {
		seps[i] = "---"
	}
	b.WriteString("| " + strings.Join(seps, " | ") + " |")
	for _, v := range values {
		obj, _ := v.(*ordObj)
		cells := make([]string, len(headers))
		for i, h := range headers {
			if obj != nil {
				if val, ok := obj.get(h); ok {
					cells[i] = cell(val)
				}
			}
		}
		b.WriteString("\n| " + strings.Join(cells, " | ") + " |")
	}
	return b.String()
}

// --- single objects and tags ---------------------------------------------------------------

func (s *Server) serveObject(rq *request, name, id string) {
	if name == "servers" {
		for _, o := range s.collectionObjects("servers") {
			if o.id == id {
				rq.writeJSON(http.StatusOK, o.data)
				return
			}
		}
		rq.writeError(http.StatusNotFound, "no such xenServer "+id, kv("id", id, "type", "xenServer"))
		return
	}
	coll, _ := xapiCollection(name)
	s.st.mu.RLock()
	o := s.st.lookup(coll, id)
	s.st.mu.RUnlock()
	if o == nil {
		rq.noSuchObject(coll, id)
		return
	}
	var pretty bytes.Buffer
	_ = indentJSON(&pretty, o.json())
	rq.writeJSONBytes(http.StatusOK, pretty.Bytes())
}

func (rq *request) noSuchObject(coll collection, id string) {
	t := coll.xoType()
	rq.writeError(http.StatusNotFound, "no such "+t+" "+id, kv("id", id, "type", t))
}

func (s *Server) serveTag(rq *request, coll collection, id, tag string, add bool) {
	found := s.changeTag(coll, id, tag, add)
	if !found {
		rq.noSuchObject(coll, id)
		return
	}
	rq.w.WriteHeader(http.StatusNoContent)
}

// --- helpers -------------------------------------------------------------------------------

// countingWriter counts the bytes written for the request's counter.
type countingWriter struct {
	http.ResponseWriter
	bytes interface{ Add(int64) int64 }
	// trickle > 0 sends one byte at a time, trickle apart (see FaultTrickle), until ctx ends.
	trickle time.Duration
	ctx     context.Context
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.trickle <= 0 {
		n, err := w.ResponseWriter.Write(p)
		w.bytes.Add(int64(n))
		return n, err
	}
	rc := http.NewResponseController(w.ResponseWriter)
	for i := range p {
		if _, err := w.ResponseWriter.Write(p[i : i+1]); err != nil {
			return i, err
		}
		w.bytes.Add(1)
		_ = rc.Flush()
		t := time.NewTimer(w.trickle)
		select {
		case <-t.C:
		case <-w.ctx.Done():
			t.Stop()
			return i + 1, w.ctx.Err()
		}
	}
	return len(p), nil
}

// renamed returns a JSON object with its name_label replaced.
func renamed(obj []byte, name string) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return obj
	}
	m["name_label"], _ = json.Marshal(name)
	out, _ := json.Marshal(m)
	return out
}

// Unwrap lets http.ResponseController reach the underlying writer (Flush, Hijack).
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
