package xo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/go-resty/resty/v2"
)

// Event types of XO's stream.
const (
	EventAdd    = "add"
	EventUpdate = "update"
	EventRemove = "remove"
)

// Collections of XO's event stream, as XO names them in subscriptions.
const (
	CollectionVM   = "VM"
	CollectionHost = "host"
	CollectionPool = "pool"
)

// subscription asks the event stream for one collection's changes, with only the given fields.
type subscription struct {
	Collection string   `json:"collection"`
	Fields     []string `json:"fields,omitempty"`
}

// subscriptions are what the inventory needs.
var subscriptions = []subscription{
	{Collection: CollectionVM, Fields: VMFields},
	{Collection: CollectionHost, Fields: HostFields},
	{Collection: CollectionPool, Fields: PoolFields},
}

// Event is one change from XO's event stream. Exactly one of VM, Host, Pool is set. For a
// remove, it holds the object as it was.
type Event struct {
	Type       string
	Collection string
	VM         *VM
	Host       *Host
	Pool       *Pool
}

// ErrNoEventStream means the server has no /rest/v0/events (XO older than 5.192): the caller
// falls back to periodic relists.
var ErrNoEventStream = errors.New("xo: the server has no event stream")

// maxEventLine bounds one line of the stream; a longer line breaks the stream.
const maxEventLine = 4 << 20

// WatchOptions configures Watch.
type WatchOptions struct {
	// IdleTimeout breaks the stream when nothing, not even a ping (XO sends one every 30 s),
	// arrives for this long. Default 75s.
	IdleTimeout time.Duration
	// Ready is called once every subscription is in place, before the first change is passed
	// on; a caller relists then, so that no change falls between its list and the stream.
	Ready func()
}

// Watch opens XO's event stream, subscribes, and calls fn for each change until ctx ends or the
// stream breaks. It always returns a non-nil error: ctx.Err(), ErrNoEventStream, or why the
// stream broke.
func (c *Client) Watch(ctx context.Context, o WatchOptions, fn func(Event)) error {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 75 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const op = "open events"
	start := time.Now()
	resp, err := c.r.R().SetContext(ctx).SetHeader("Accept", "text/event-stream").SetDoNotParseResponse(true).
		// Opened once (a condition that says no also stops resty's retry of network errors):
		// the inventory reopens the stream with its own backoff.
		AddRetryCondition(func(*resty.Response, error) bool { return false }).
		Execute(http.MethodGet, "/events")
	err = c.result(op, resp, err)
	observe(c.name, op, start, err)
	var e *Error
	if errors.As(err, &e) && e.Kind == KindBadResponse && e.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %w", ErrNoEventStream, err)
	}
	if err != nil {
		return err
	}
	body := resp.RawResponse.Body
	defer body.Close()

	// Break the stream when it goes quiet: a stalled stream must not leave the inventory
	// believing it is current.
	idle := time.AfterFunc(o.IdleTimeout, cancel)
	defer idle.Stop()

	r := bufio.NewReaderSize(body, 64<<10)
	subscribed := false
	var event string
	var data bytes.Buffer
	for {
		line, err := readLine(r)
		if err != nil {
			if ctx.Err() != nil && !idle.Stop() {
				return &Error{Op: "events", Kind: KindUnavailable, Message: fmt.Sprintf("stream idle for %s", o.IdleTimeout)}
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &Error{Op: "events", Kind: KindUnavailable, Message: "stream broken", Err: err}
		}
		idle.Reset(o.IdleTimeout)
		switch {
		case len(line) == 0:
			if event == "" && data.Len() == 0 {
				continue
			}
			if event == "init" {
				if subscribed {
					return &Error{Op: "events", Kind: KindBadResponse, Message: "second init event"}
				}
				var init struct {
					ID string `json:"id"`
				}
				if err := json.Unmarshal(data.Bytes(), &init); err != nil || init.ID == "" {
					return &Error{Op: "events", Kind: KindBadResponse, Message: "bad init event", Err: err}
				}
				if err := c.subscribe(ctx, init.ID); err != nil {
					return err
				}
				subscribed = true
				if o.Ready != nil {
					o.Ready()
				}
			} else if subscribed {
				if ev, ok, err := parseEvent(event, data.Bytes()); err != nil {
					return err
				} else if ok {
					eventsTotal.WithLabelValues(c.name, ev.Collection, ev.Type).Inc()
					fn(ev)
				}
			}
			event = ""
			data.Reset()
		case line[0] == ':':
			// An SSE comment.
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				event = string(value)
			case "data":
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.Write(value)
				if data.Len() > maxEventLine {
					return &Error{Op: "events", Kind: KindBadResponse, Message: "event too large"}
				}
			}
		}
	}
}

// readLine reads one line without its end of line; an over-long line is an error.
func readLine(r *bufio.Reader) ([]byte, error) {
	var long []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, chunk...)
			if len(long) > maxEventLine {
				return nil, errors.New("line too long")
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if long != nil {
			chunk = append(long, chunk...)
		}
		chunk = bytes.TrimSuffix(chunk, []byte("\n"))
		return bytes.TrimSuffix(chunk, []byte("\r")), nil
	}
}

func (c *Client) subscribe(ctx context.Context, conn string) error {
	for _, s := range subscriptions {
		sctx, cancel := context.WithTimeout(ctx, c.timeout)
		req := c.r.R().SetHeader("Content-Type", "application/json").SetBody(s)
		err := c.do(sctx, "subscribe "+s.Collection, http.MethodPost, "/events/"+url.PathEscape(conn)+"/subscriptions", req, nil)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// parseEvent decodes one add/update/remove event. Other events (ping) are not changes.
func parseEvent(event string, data []byte) (Event, bool, error) {
	switch event {
	case EventAdd, EventUpdate, EventRemove:
	default:
		return Event{}, false, nil
	}
	var head struct {
		Subscription string `json:"$subscription"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Event{}, false, &Error{Op: "events", Kind: KindBadResponse, Message: "undecodable event", Err: err}
	}
	ev := Event{Type: event, Collection: head.Subscription}
	var (
		target any
		id     *string
	)
	switch head.Subscription {
	case CollectionVM:
		ev.VM = new(VM)
		target, id = ev.VM, &ev.VM.ID
	case CollectionHost:
		ev.Host = new(Host)
		target, id = ev.Host, &ev.Host.ID
	case CollectionPool:
		ev.Pool = new(Pool)
		target, id = ev.Pool, &ev.Pool.ID
	default:
		return Event{}, false, nil
	}
	if err := json.Unmarshal(data, target); err != nil {
		return Event{}, false, &Error{Op: "events", Kind: KindBadResponse, Message: "undecodable event", Err: err}
	}
	if *id == "" {
		return Event{}, false, nil
	}
	return ev, true, nil
}
