package xosim

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
)

// The event stream follows @xen-orchestra/rest-api's events/ (event.class.mts, event.service.mts,
// event.controller.mts): GET /rest/v0/events opens a text/event-stream whose first frame is
// "init" with the connection id, then "ping" frames; POST /events/<id>/subscriptions adds a
// subscription to a collection with the fields to send; object changes are sent as "add",
// "update" and "remove" frames carrying {"$subscription": <collection>, ...picked fields}.

// listenerTypes are the collections XO 0.39.0 accepts in a subscription (XoListenerType).
// The simulator only has objects of VM, host and pool; the others are accepted and silent.
var listenerTypes = []string{
	"pool", "VBD", "host", "VIF", "VTPM", "VM-snapshot", "SR", "VM", "VM-template", "message",
	"vgpu", "gpuGroup", "network", "PBD", "PCI", "PGPU", "PIF", "VDI", "VDI-snapshot",
	"VDI-unmanaged", "vgpuType", "VM-controller", "SM", "alarm", "task",
}

// subscription is a subscriber's interest in one collection: fields nil means "*".
type subscription struct {
	fields []string
}

type subscriber struct {
	id     string
	path   string
	wake   chan struct{}
	closed chan struct{}

	mu       sync.Mutex
	subs     map[string]subscription
	queue    [][]byte
	queued   int
	dead     bool
	cut      bool // CutEventStreams: end in the middle of the next frame
	stopOnce sync.Once
}

// enqueue adds a frame; a subscriber whose queue exceeds max is cut off.
func (sb *subscriber) enqueue(frame []byte, max int) {
	sb.mu.Lock()
	if sb.dead {
		sb.mu.Unlock()
		return
	}
	sb.queue = append(sb.queue, frame)
	sb.queued += len(frame)
	over := sb.queued > max
	sb.mu.Unlock()
	if over {
		sb.kill()
		return
	}
	sb.signal()
}

func (sb *subscriber) signal() {
	select {
	case sb.wake <- struct{}{}:
	default:
	}
}

func (sb *subscriber) kill() {
	sb.stopOnce.Do(func() {
		sb.mu.Lock()
		sb.dead = true
		sb.queue = nil
		sb.queued = 0
		sb.mu.Unlock()
		close(sb.closed)
	})
}

// take removes and returns the queued frames.
func (sb *subscriber) take() [][]byte {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	q := sb.queue
	sb.queue = nil
	sb.queued = 0
	return q
}

type eventHub struct {
	mu   sync.RWMutex
	subs map[string]*subscriber
}

func (h *eventHub) init() {
	h.subs = map[string]*subscriber{}
}

func (h *eventHub) get(id string) *subscriber {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.subs[id]
}

func (h *eventHub) wakeAll() {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, sb := range h.subs {
		sb.signal()
	}
}

func frame(event string, data any) []byte {
	b := make([]byte, 0, 128)
	b = append(b, "event: "...)
	b = append(b, event...)
	b = append(b, "\ndata: "...)
	b = appendJSON(b, data)
	return append(b, "\n\n"...)
}

// publish sends the visible changes to the subscribers of their collections. The store lock is
// held by the caller, so every subscriber sees changes in commit order.
func (s *Server) publish(changes []change) {
	if len(changes) == 0 {
		return
	}
	h := &s.events
	h.mu.RLock()
	defer h.mu.RUnlock()
	if len(h.subs) == 0 {
		return
	}
	for _, c := range changes {
		typ := c.coll.xoType()
		// Frames are shared between subscribers asking for the same fields.
		cache := map[string][]byte{}
		for _, sb := range h.subs {
			sb.mu.Lock()
			sub, ok := sb.subs[typ]
			sb.mu.Unlock()
			if !ok {
				continue
			}
			key := "*"
			if sub.fields != nil {
				key = "\x00" + strings.Join(sub.fields, "\x00")
			}
			f, seen := cache[key]
			if !seen {
				f = eventFrame(typ, c, sub.fields)
				cache[key] = f
			}
			if f != nil {
				sb.enqueue(f, s.opts.MaxEventBuffer)
			}
		}
	}
}

// eventFrame is XO's XoListener.handleData: the picked object (previous object for a remove),
// nil for an update that does not change the picked fields.
func eventFrame(typ string, c change, fields []string) []byte {
	event := "update"
	switch {
	case c.before == nil:
		event = "add"
	case c.after == nil:
		event = "remove"
	}
	var obj, prev map[string]any
	if c.after != nil {
		obj = c.after.data
	}
	if c.before != nil {
		prev = c.before.data
	}
	payload := kv("$subscription", typ)
	if fields == nil {
		src := obj
		if src == nil {
			src = prev
		}
		keys := make([]string, 0, len(src))
		for k := range src {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			payload.set(k, src[k])
		}
		return frame(event, payload)
	}
	var picked *ordObj
	if obj != nil {
		picked = pick(obj, fields)
	}
	if event == "update" {
		prevPicked := pick(prev, fields)
		if reflect.DeepEqual(plain(picked), plain(prevPicked)) {
			return nil
		}
	}
	if picked == nil {
		picked = pick(prev, fields)
	}
	for _, k := range picked.keys {
		payload.set(k, picked.vals[k])
	}
	return frame(event, payload)
}

// plain converts picked values to comparable plain values (lodash isEqual ignores key order).
func plain(v any) any {
	switch x := v.(type) {
	case *ordObj:
		m := make(map[string]any, len(x.keys))
		for _, k := range x.keys {
			m[k] = plain(x.vals[k])
		}
		return m
	case *jsArr:
		out := make([]any, len(x.elems))
		for i, e := range x.elems {
			out[i] = plain(e)
		}
		return out
	}
	return v
}

// serveEvents is GET /rest/v0/events.
func (s *Server) serveEvents(rq *request) {
	w, r := rq.w, rq.r
	sb := &subscriber{
		id:     newUUID(),
		path:   r.URL.Path,
		wake:   make(chan struct{}, 1),
		closed: make(chan struct{}),
		subs:   map[string]subscription{},
	}
	h := &s.events
	h.mu.Lock()
	h.subs[sb.id] = sb
	h.mu.Unlock()
	defer func() {
		sb.kill()
		h.mu.Lock()
		delete(h.subs, sb.id)
		h.mu.Unlock()
	}()

	sb.enqueue(frame("init", kv("id", sb.id)), s.opts.MaxEventBuffer)

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Connection", "keep-alive")
	hdr.Set("Cache-Control", "no-cache, no-transform")
	rc := http.NewResponseController(w)
	headerSent := false

	ping := time.NewTicker(s.opts.PingInterval)
	defer ping.Stop()
	ctx := r.Context()
	for {
		// While stalled, poll the fault set so that an expiring stall is noticed.
		var stallPoll <-chan time.Time
		if s.faults.stalled(sb.path, s.now()) {
			stallPoll = time.After(20 * time.Millisecond)
		} else {
			if !headerSent {
				w.WriteHeader(http.StatusOK)
				headerSent = true
			}
			frames := sb.take()
			cut := sb.takeCut()
			for i, f := range frames {
				if cut && i == len(frames)-1 {
					break
				}
				if _, err := w.Write(f); err != nil {
					return
				}
			}
			if cut {
				// Half of the last frame (or of a ping when none is queued), then the
				// connection goes: the client reads a message that never ends.
				last := frame("ping", kv("ping", float64(s.now().UnixMilli())))
				if len(frames) > 0 {
					last = frames[len(frames)-1]
				}
				_, _ = w.Write(last[:len(last)/2])
				abortConnection(w, false)
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-sb.closed:
			return
		case <-sb.wake:
		case <-stallPoll:
		case <-ping.C:
			sb.enqueue(frame("ping", kv("ping", float64(s.now().UnixMilli()))), s.opts.MaxEventBuffer)
		}
	}
}

// addSubscription is POST /rest/v0/events/<id>/subscriptions.
func (s *Server) addSubscription(rq *request, connID string) {
	body, status, msg := readJSONBody(rq.r)
	if status != 0 {
		rq.writeError(status, msg, nil)
		return
	}
	fieldErrs := newOrdObj(0)
	var collection string
	var fields []string
	switch b := body.(type) {
	case nil:
		fieldErrs.set("body", kv("message", "'body' is required"))
	case map[string]any:
		var extra []string
		for k := range b {
			if k != "collection" && k != "fields" {
				extra = append(extra, k)
			}
		}
		if len(extra) > 0 {
			slices.Sort(extra)
			val := newOrdObj(len(extra))
			for _, k := range extra {
				val.set(k, b[k])
			}
			fieldErrs.set("body", kv("message", `"`+strings.Join(extra, ",")+`" is an excess property and therefore is not allowed`, "value", val))
		}
		if f, ok := b["fields"]; ok {
			switch fv := f.(type) {
			case string:
				if fv != "*" {
					fieldErrs.set("body.fields", kv("message", "Value does not match any allowed schema", "value", f))
				}
			case []any:
				for _, e := range fv {
					es, ok := e.(string)
					if !ok {
						fieldErrs.set("body.fields", kv("message", "Value does not match any allowed schema", "value", f))
						fields = nil
						break
					}
					fields = append(fields, es)
				}
				if fields == nil {
					fields = []string{}
				}
			default:
				fieldErrs.set("body.fields", kv("message", "Value does not match any allowed schema", "value", f))
			}
		}
		c, ok := b["collection"]
		cs, isStr := c.(string)
		switch {
		case !ok:
			fieldErrs.set("body.collection", kv("message", "'collection' is required"))
		case !isStr || !slices.Contains(listenerTypes, cs):
			fieldErrs.set("body.collection", kv("message", "Value does not match any allowed schema", "value", c))
		default:
			collection = cs
		}
	default:
		fieldErrs.set("body", kv("message", "invalid object", "value", body))
	}
	if len(fieldErrs.keys) > 0 {
		rq.writeError(http.StatusUnprocessableEntity, fieldErrs, map[string]any{})
		return
	}
	sb := s.events.get(connID)
	if sb == nil {
		rq.noSuchEvent(connID)
		return
	}
	sb.mu.Lock()
	sb.subs[collection] = subscription{fields: fields}
	sb.mu.Unlock()
	rq.writeJSON(http.StatusCreated, kv("id", collection))
}

// removeSubscription is DELETE /rest/v0/events/<id>/subscriptions/<collection>.
func (s *Server) removeSubscription(rq *request, connID, collection string) {
	if !slices.Contains(listenerTypes, collection) {
		errs := kv("subscriptionId", kv("message", "Value does not match any allowed schema", "value", collection))
		rq.writeError(http.StatusUnprocessableEntity, errs, map[string]any{})
		return
	}
	sb := s.events.get(connID)
	if sb == nil {
		rq.noSuchEvent(connID)
		return
	}
	sb.mu.Lock()
	delete(sb.subs, collection)
	sb.mu.Unlock()
	rq.w.WriteHeader(http.StatusNoContent)
}

func (rq *request) noSuchEvent(id string) {
	rq.writeError(http.StatusNotFound, "no such event "+id, kv("id", id, "type", "event"))
}

// maxBodyBytes is body-parser's default limit.
const maxBodyBytes = 100 << 10

// readJSONBody parses a JSON request body as Express's json() middleware does: only with a
// JSON content type and a body (otherwise the body is undefined: nil); objects and arrays
// only. On failure it returns the status and message XO's error handler answers with.
func readJSONBody(r *http.Request) (any, int, string) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" || (r.ContentLength == 0 && len(r.TransferEncoding) == 0) {
		return nil, 0, ""
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, http.StatusInternalServerError, "request aborted"
	}
	if len(data) > maxBodyBytes {
		return nil, http.StatusInternalServerError, "request entity too large"
	}
	trimmed := strings.TrimLeft(string(data), " \t\r\n")
	if trimmed == "" {
		return map[string]any{}, 0, ""
	}
	if trimmed[0] != '{' && trimmed[0] != '[' {
		return nil, http.StatusInternalServerError, "Unexpected token '" + trimmed[:1] + "', \"" + truncateForMessage(trimmed) + "\" is not valid JSON"
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, http.StatusInternalServerError, "Unexpected token in JSON: " + err.Error()
	}
	return v, 0, ""
}

func truncateForMessage(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// EventStreams returns how many event streams are open.
func (s *Server) EventStreams() int {
	s.events.mu.RLock()
	defer s.events.mu.RUnlock()
	return len(s.events.subs)
}

// EventSubscriptions returns, per open event stream id, the collections it is subscribed to
// (sorted).
func (s *Server) EventSubscriptions() map[string][]string {
	s.events.mu.RLock()
	defer s.events.mu.RUnlock()
	out := make(map[string][]string, len(s.events.subs))
	for id, sb := range s.events.subs {
		sb.mu.Lock()
		cols := make([]string, 0, len(sb.subs))
		for c := range sb.subs {
			cols = append(cols, c)
		}
		sb.mu.Unlock()
		slices.Sort(cols)
		out[id] = cols
	}
	return out
}

// CutEventStreams cuts every open event stream in the middle of a message, as a network
// failure or a proxy dropping the connection does: each stream sends the frames it had queued
// but the last, the first half of that one (of a ping frame when none was queued), and the
// connection is closed without ending the response. The events after it are lost: a client
// must reconnect and relist. It returns how many streams it marked; each is cut as soon as
// its stream runs (within one write).
func (s *Server) CutEventStreams() int {
	s.events.mu.RLock()
	defer s.events.mu.RUnlock()
	for _, sb := range s.events.subs {
		sb.mu.Lock()
		sb.cut = true
		sb.mu.Unlock()
		sb.signal()
	}
	return len(s.events.subs)
}

// takeCut reports, once, whether CutEventStreams marked the subscriber.
func (sb *subscriber) takeCut() bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	c := sb.cut
	sb.cut = false
	return c
}

// CloseEventStreams ends every open event stream (as when XO restarts).
func (s *Server) CloseEventStreams() {
	s.events.mu.RLock()
	defer s.events.mu.RUnlock()
	for _, sb := range s.events.subs {
		sb.kill()
	}
}
