package xo

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"
)

// BasePath is the only version of XO's REST API.
const BasePath = "/rest/v0"

// Options configures a Client.
type Options struct {
	// Name names the XO server in metrics (label "server"). Default: the URL's host[:port].
	Name string
	// URL is XO's base URL, e.g. https://xoa.example.com (a base path is kept).
	URL string
	// Token is the XO authentication token, sent as the authenticationToken cookie.
	Token string
	// TLSConfig verifies XO's certificate; nil means the system roots, TLS 1.2 or newer.
	TLSConfig *tls.Config
	// Timeout bounds every request that returns one object, retries included, and the wait
	// for response headers of a streamed list. Default 10s.
	Timeout time.Duration
	// ListTimeout bounds a whole streamed list, retries included. Default 2m.
	ListTimeout time.Duration
	// Retries is how many times an idempotent read is retried after a network error, a 429 or
	// a 5xx (never after another 4xx), within the request's timeout: the transport's retries,
	// below the controllers' per-Node ones (controllers/common.Retries). Default 3; negative
	// disables them.
	Retries int
	// RetryWait is the wait before the first retry; each next wait doubles, up to 10 times
	// RetryWait, drawn at random from its upper half so that replicas do not retry in step.
	// Default 200ms.
	RetryWait time.Duration
	// UserAgent names the caller. Default "xenorchestra-cloud-controller-manager".
	UserAgent string
}

// Client is a client of XO's REST API. It is safe for concurrent use.
type Client struct {
	r           *resty.Client
	name        string
	timeout     time.Duration
	listTimeout time.Duration
	// token is kept only to redact it from the answers that go into errors.
	token []byte
}

// New returns a Client. It makes no request.
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("xo: invalid URL %q: want http(s)://host[:port]", o.URL)
	}
	if o.Token == "" {
		return nil, errors.New("xo: no authentication token")
	}
	if o.Name == "" {
		o.Name = u.Host
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.ListTimeout <= 0 {
		o.ListTimeout = 2 * time.Minute
	}
	if o.Retries == 0 {
		o.Retries = 3
	} else if o.Retries < 0 {
		o.Retries = 0
	}
	if o.RetryWait <= 0 {
		o.RetryWait = 200 * time.Millisecond
	}
	if o.UserAgent == "" {
		o.UserAgent = "xenorchestra-cloud-controller-manager"
	}
	tlsConfig := o.TLSConfig
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   o.Timeout,
		ResponseHeaderTimeout: o.Timeout,
		MaxIdleConns:          16,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	r := resty.New().
		SetTransport(readErrorBodies{transport}).
		SetBaseURL(strings.TrimRight(u.String(), "/")+BasePath).
		SetHeader("User-Agent", o.UserAgent).
		SetHeader("Accept", "application/json").
		SetCookie(&http.Cookie{Name: "authenticationToken", Value: o.Token}).
		SetLogger(discardLogger{}).
		SetRedirectPolicy(resty.NoRedirectPolicy()).
		SetResponseBodyLimit(maxObject).
		SetRetryCount(o.Retries).
		SetRetryWaitTime(o.RetryWait).
		SetRetryMaxWaitTime(10 * o.RetryWait)
	return &Client{r: r, name: o.Name, timeout: o.Timeout, listTimeout: o.ListTimeout, token: []byte(o.Token)}, nil
}

// maxObject bounds the body of an answer with one object.
const maxObject = 16 << 20

// redact removes the token from a server's answer before any of it goes into an error (and
// so into logs and events): a reverse proxy or a misbehaving server may echo the request's
// cookie in its error page. It runs before the message is cut, so no part of it survives.
func (c *Client) redact(body []byte) []byte {
	if len(c.token) == 0 {
		return body
	}
	return bytes.ReplaceAll(body, c.token, []byte("[redacted]"))
}

// discardLogger keeps resty quiet: the client reports through errors and metrics.
type discardLogger struct{}

func (discardLogger) Errorf(string, ...any) {}
func (discardLogger) Warnf(string, ...any)  {}
func (discardLogger) Debugf(string, ...any) {}

// readErrorBodies reads the body of every non-2xx answer whole (at most 64 KiB) and closes the
// connection's: resty drops the answers it retries without closing a streamed one's body
// (SetDoNotParseResponse), and the message is needed once resty is done with the answer.
type readErrorBodies struct{ next http.RoundTripper }

func (t readErrorBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || (resp.StatusCode >= 200 && resp.StatusCode <= 299) {
		return resp, err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = &bufferedBody{Reader: bytes.NewReader(b), data: b}
	return resp, nil
}

// bufferedBody is an error answer's body, kept whole by readErrorBodies.
type bufferedBody struct {
	*bytes.Reader
	data []byte
}

func (*bufferedBody) Close() error { return nil }

// do sends req and hands the 2xx answer of its last attempt to read, which consumes what it
// needs of the body (do closes it). resty retries reads (GET) within ctx after a network
// error, a 429 or a 5xx, never after another 4xx; a streamed answer only until its headers.
func (c *Client) do(ctx context.Context, op, method, path string, req *resty.Request, read func(*resty.Response) error) error {
	start := time.Now()
	// resty has no hook for every attempt (OnAfterResponse skips errors and streamed answers,
	// retry hooks see only retried ones): the retry condition counts the attempts it retries,
	// do counts the last one after read, as a body cut short is that attempt's outcome. (resty
	// calls no condition once ctx has ended or when retries are off.)
	var (
		retried    int // the last attempt the condition retried, and its error
		retriedErr error
	)
	req.SetContext(ctx).AddRetryCondition(func(resp *resty.Response, err error) bool {
		e := c.result(op, resp, err)
		if method != http.MethodGet || !retryable(e) || req.Attempt > c.r.RetryCount {
			return false
		}
		observe(c.name, op, start, e)
		start, retried, retriedErr = time.Now(), req.Attempt, e
		return true
	})
	resp, err := req.Execute(method, path)
	if retried > 0 && req.Attempt == retried {
		return retriedErr // ctx ended during the wait for the next attempt
	}
	if resp != nil && resp.RawResponse != nil {
		defer resp.RawResponse.Body.Close()
	}
	if err = c.result(op, resp, err); err == nil && read != nil {
		err = read(resp)
	}
	observe(c.name, op, start, err)
	return err
}

// retryable reports a failure that the same read may not meet again: a network error, a 429
// or a 5xx.
func retryable(err error) bool {
	k := kindOf(err)
	return k == KindUnavailable || k == KindServerError
}

// result classifies one attempt: nil for a 2xx answer, else the typed error.
func (c *Client) result(op string, resp *resty.Response, err error) error {
	if err != nil {
		return transportError(op, resp, err)
	}
	raw := resp.RawResponse
	if raw.StatusCode >= 200 && raw.StatusCode <= 299 {
		return nil
	}
	var body []byte
	if eb, ok := raw.Body.(*bufferedBody); ok {
		body = eb.data
	}
	return statusError(op, raw.StatusCode, raw.Header.Get("Content-Type"), c.redact(body))
}

// transportError wraps a network failure: no answer (url.Error carries the URL, never the
// cookie), or an answer whose body was cut short or too large.
func transportError(op string, resp *resty.Response, err error) *Error {
	e := &Error{Op: op, Kind: KindUnavailable, Err: err}
	var ue *url.Error
	switch {
	case errors.As(err, &ue):
		e.Err = ue.Err
	case errors.Is(err, resty.ErrResponseBodyTooLarge):
		e.Kind, e.StatusCode, e.Message = KindBadResponse, resp.StatusCode(), "body too large"
	case resp != nil && resp.RawResponse != nil:
		e.StatusCode, e.Message = resp.StatusCode(), "body cut short"
	}
	return e
}

// get fetches one JSON object into out. resty reads the body whole (within the retries), so
// that a connection cut mid-body is a retryable network error rather than a decoding one.
func (c *Client) get(ctx context.Context, op, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.do(ctx, op, http.MethodGet, path, c.r.R(), func(resp *resty.Response) error {
		if err := json.Unmarshal(resp.Body(), out); err != nil {
			return &Error{Op: op, Kind: KindBadResponse, StatusCode: resp.StatusCode(), Message: "undecodable body", Err: err}
		}
		return nil
	})
}

// GetVM reads one VM. A VM absent from XO's store is an error for which IsNotFound is true.
func (c *Client) GetVM(ctx context.Context, id string) (*VM, error) {
	vm := new(VM)
	if err := c.get(ctx, "get vm", "/vms/"+url.PathEscape(id), vm); err != nil {
		return nil, err
	}
	return vm, nil
}

// GetPool reads one pool.
func (c *Client) GetPool(ctx context.Context, id string) (*Pool, error) {
	p := new(Pool)
	if err := c.get(ctx, "get pool", "/pools/"+url.PathEscape(id), p); err != nil {
		return nil, err
	}
	return p, nil
}

// ListVMs streams the VMs matching filter (XO's filter syntax; "" for every VM) with
// VMFields, calling fn once per distinct id.
func (c *Client) ListVMs(ctx context.Context, filter string, fn func(*VM)) error {
	return list(ctx, c, "vms", VMFields, filter, func(v *VM) string { return v.ID }, fn)
}

// ListHosts streams the hosts matching filter ("" for every host) with HostFields.
func (c *Client) ListHosts(ctx context.Context, filter string, fn func(*Host)) error {
	return list(ctx, c, "hosts", HostFields, filter, func(h *Host) string { return h.ID }, fn)
}

// ListPools streams every pool with PoolFields.
func (c *Client) ListPools(ctx context.Context, fn func(*Pool)) error {
	return list(ctx, c, "pools", PoolFields, "", func(p *Pool) string { return p.ID }, fn)
}

// ListServers streams XO's pool connections with ServerFields.
func (c *Client) ListServers(ctx context.Context, fn func(*Server)) error {
	return list(ctx, c, "servers", ServerFields, "", func(s *Server) string { return s.ID }, fn)
}

// PoolFilter returns the XO filter matching the objects of these pools (by $pool), "" for
// none: `$pool:|(<id> <id> ...)`. Pool ids are uuids, which need no quoting.
func PoolFilter(poolIDs []string) string {
	if len(poolIDs) == 0 {
		return ""
	}
	return "$pool:|(" + strings.Join(poolIDs, " ") + ")"
}

// list streams collection as ndjson and decodes it one object at a time. Objects without an id
// are skipped; duplicates (older XO versions could repeat entries) are passed once. On error the
// caller must discard what fn received: the listing is partial.
func list[T any](ctx context.Context, c *Client, collection string, fields []string, filter string, id func(*T) string, fn func(*T)) error {
	op := "list " + collection
	ctx, cancel := context.WithTimeout(ctx, c.listTimeout)
	defer cancel()
	q := url.Values{"fields": {strings.Join(fields, ",")}, "ndjson": {"true"}}
	if filter != "" {
		q.Set("filter", filter)
	}
	start := time.Now()
	// A listing is retried only until its answer's headers (see do): once objects were passed
	// on, the caller would get them twice. The inventory relists with its own backoff.
	req := c.r.R().SetQueryParamsFromValues(q).SetDoNotParseResponse(true)
	err := c.do(ctx, op, http.MethodGet, "/"+collection, req, func(resp *resty.Response) error {
		n, err := decodeNDJSON(resp.RawResponse.Body, id, fn)
		listedObjects.WithLabelValues(c.name, collection).Set(float64(n))
		if err != nil {
			kind := KindBadResponse
			if ctx.Err() != nil {
				kind, err = KindUnavailable, ctx.Err()
			}
			return &Error{Op: op, Kind: kind, Message: "listing cut short", Err: err}
		}
		return nil
	})
	observe(c.name, op+" stream", start, err)
	return err
}

// maxListing bounds the bytes of one listing: a hundred times the listing of 10,000 VMs.
const maxListing = 1 << 30

// boundedReader fails once more than total bytes, or a line longer than line bytes, went
// through: a hostile or broken XO cannot make a listing grow memory without bound.
type boundedReader struct {
	r                 io.Reader
	line, total       int
	inLine, readSoFar int
}

func (b *boundedReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.readSoFar += n
	if b.readSoFar > b.total {
		return 0, fmt.Errorf("listing larger than %d MiB", b.total>>20)
	}
	for rest := p[:n]; ; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			b.inLine += len(rest)
		} else {
			b.inLine += i
		}
		if b.inLine > b.line {
			return 0, fmt.Errorf("object larger than %d MiB", b.line>>20)
		}
		if i < 0 {
			return n, err
		}
		b.inLine, rest = 0, rest[i+1:]
	}
}

// decodeNDJSON decodes one JSON value per line from r. It returns the number of distinct objects
// passed to fn. A body cut mid-value is an error; the caller must then discard what it got.
func decodeNDJSON[T any](r io.Reader, id func(*T) string, fn func(*T)) (int, error) {
	dec := json.NewDecoder(&boundedReader{r: r, line: maxEventLine, total: maxListing})
	seen := make(map[string]struct{}, 1024)
	for {
		v := new(T)
		if err := dec.Decode(v); err != nil {
			if err == io.EOF {
				return len(seen), nil
			}
			return len(seen), err
		}
		k := id(v)
		if k == "" {
			continue
		}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		fn(v)
	}
}
