package xo

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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
	// URL is XO's base URL, e.g. https://xoa.example.com (a base path is kept).
	URL string
	// Token is the XO authentication token, sent as the authenticationToken cookie.
	Token string
	// TLSConfig verifies XO's certificate; nil means the system roots, TLS 1.2 or newer.
	TLSConfig *tls.Config
	// Timeout bounds every request that returns one object, and the wait for response
	// headers of a streamed list. Default 10s.
	Timeout time.Duration
	// ListTimeout bounds a whole streamed list. Default 2m.
	ListTimeout time.Duration
	// Retries is how many times an idempotent read is retried after a network error, a 429 or
	// a 5xx (never after another 4xx). Default 3; negative disables retries.
	Retries int
	// RetryWait is the first backoff; it doubles each try, with jitter, up to 10 times it.
	// Default 200ms.
	RetryWait time.Duration
	// UserAgent names the caller. Default "xenorchestra-cloud-controller-manager".
	UserAgent string
}

// Client is a client of XO's REST API. It is safe for concurrent use.
type Client struct {
	r           *resty.Client
	timeout     time.Duration
	listTimeout time.Duration
	retries     int
	retryWait   time.Duration
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
		SetTransport(transport).
		SetBaseURL(strings.TrimRight(u.String(), "/")+BasePath).
		SetHeader("User-Agent", o.UserAgent).
		SetHeader("Accept", "application/json").
		SetCookie(&http.Cookie{Name: "authenticationToken", Value: o.Token}).
		SetLogger(discardLogger{}).
		SetDoNotParseResponse(true).
		SetRedirectPolicy(resty.NoRedirectPolicy())
	return &Client{r: r, timeout: o.Timeout, listTimeout: o.ListTimeout, retries: o.Retries, retryWait: o.RetryWait, token: []byte(o.Token)}, nil
}

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

// do runs one request with retries and hands the successful response to read, which must
// consume what it needs of the body (do closes it). Only reads (GET) are retried: after a
// network error, a 429 or a 5xx, and after a read that failed on the network before passing
// anything on (read returns a transport error from the body).
func (c *Client) do(ctx context.Context, op, method, path string, query url.Values, body any, read func(*http.Response) error) error {
	tries := 1
	if method == http.MethodGet {
		tries += c.retries
	}
	var lastErr error
	for attempt := 0; attempt < tries; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, backoff(c.retryWait, attempt)); err != nil {
				return lastErr
			}
		}
		retry, err := c.try(ctx, op, method, path, query, body, read)
		if err == nil || !retry || ctx.Err() != nil {
			return err
		}
		lastErr = err
	}
	return lastErr
}

// try makes one attempt; retry says whether a failure may be retried.
func (c *Client) try(ctx context.Context, op, method, path string, query url.Values, body any, read func(*http.Response) error) (retry bool, err error) {
	start := time.Now()
	defer func() { observe(op, start, err) }()
	req := c.r.R().SetContext(ctx)
	if query != nil {
		req.SetQueryParamsFromValues(query)
	}
	if body != nil {
		req.SetHeader("Content-Type", "application/json").SetBody(body)
	}
	resp, rerr := req.Execute(method, path)
	if rerr != nil {
		return true, transportError(op, rerr)
	}
	raw := resp.RawResponse
	defer raw.Body.Close()
	if raw.StatusCode < 200 || raw.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(raw.Body, 64<<10))
		e := statusError(op, raw.StatusCode, raw.Header.Get("Content-Type"), c.redact(b))
		return e.Kind == KindServerError, e
	}
	if read == nil {
		return false, nil
	}
	if err := read(raw); err != nil {
		var xe *Error
		if errors.As(err, &xe) {
			return xe.Kind == KindUnavailable, err
		}
		return false, &Error{Op: op, Kind: KindBadResponse, StatusCode: raw.StatusCode, Message: "undecodable body", Err: err}
	}
	return false, nil
}

// transportError wraps a network failure. url.Error carries the URL (never the cookie).
func transportError(op string, err error) *Error {
	e := &Error{Op: op, Kind: KindUnavailable, Err: err}
	var ue *url.Error
	if errors.As(err, &ue) {
		e.Err = ue.Err
	}
	return e
}

// backoff returns the wait before try n (n >= 1): base·2^(n-1), capped at 10·base, with ±50% jitter
// so that many replicas do not retry in step.
func backoff(base time.Duration, n int) time.Duration {
	d := base << (n - 1)
	if limit := 10 * base; d > limit || d <= 0 {
		d = limit
	}
	return d/2 + rand.N(d)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// get fetches one JSON object into out. The body is read whole first, so that a connection cut
// mid-body is a retryable network error rather than a decoding one.
func (c *Client) get(ctx context.Context, op, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.do(ctx, op, http.MethodGet, path, nil, nil, func(resp *http.Response) error {
		b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		if err != nil {
			return &Error{Op: op, Kind: KindUnavailable, StatusCode: resp.StatusCode, Message: "body cut short", Err: err}
		}
		return json.Unmarshal(b, out)
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

// Ping calls /ping, which needs no authentication; it tells whether XO is up, not whether the
// token is good.
func (c *Client) Ping(ctx context.Context) error {
	var out struct {
		Result string `json:"result"`
	}
	if err := c.get(ctx, "ping", "/ping", &out); err != nil {
		return err
	}
	if out.Result != "pong" {
		return &Error{Op: "ping", Kind: KindBadResponse, Message: "unexpected answer"}
	}
	return nil
}

// ListVMs streams every VM with VMFields, calling fn once per distinct id.
func (c *Client) ListVMs(ctx context.Context, fn func(*VM)) error {
	return list(ctx, c, "vms", VMFields, func(v *VM) string { return v.ID }, fn)
}

// ListHosts streams every host with HostFields.
func (c *Client) ListHosts(ctx context.Context, fn func(*Host)) error {
	return list(ctx, c, "hosts", HostFields, func(h *Host) string { return h.ID }, fn)
}

// ListPools streams every pool with PoolFields.
func (c *Client) ListPools(ctx context.Context, fn func(*Pool)) error {
	return list(ctx, c, "pools", PoolFields, func(p *Pool) string { return p.ID }, fn)
}

// ListServers streams XO's pool connections with ServerFields.
func (c *Client) ListServers(ctx context.Context, fn func(*Server)) error {
	return list(ctx, c, "servers", ServerFields, func(s *Server) string { return s.ID }, fn)
}

// list streams collection as ndjson and decodes it one object at a time. Objects without an id
// are skipped; duplicates (older XO versions could repeat entries) are passed once. On error the
// caller must discard what fn received: the listing is partial.
func list[T any](ctx context.Context, c *Client, collection string, fields []string, id func(*T) string, fn func(*T)) error {
	op := "list " + collection
	ctx, cancel := context.WithTimeout(ctx, c.listTimeout)
	defer cancel()
	q := url.Values{"fields": {strings.Join(fields, ",")}, "ndjson": {"true"}}
	start := time.Now()
	// A listing is not retried once objects were passed on: the caller would get them twice.
	// The inventory relists with its own backoff.
	err := c.do(ctx, op, http.MethodGet, "/"+collection, q, nil, func(resp *http.Response) error {
		n, err := decodeNDJSON(resp.Body, id, fn)
		listedObjects.WithLabelValues(collection).Set(float64(n))
		if err != nil {
			kind := KindBadResponse
			if ctx.Err() != nil {
				kind, err = KindUnavailable, ctx.Err()
			}
			return &Error{Op: op, Kind: kind, Message: "listing cut short", Err: err}
		}
		return nil
	})
	observe(op+" stream", start, err)
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
