package xo_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo"
)

// FuzzEventStream feeds arbitrary bytes after a valid init event to Watch, as a broken or
// hostile XO could. Watch must end with an error, never panic, and pass on only events that
// carry an object with an id.
func FuzzEventStream(f *testing.F) {
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"VM"}`))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: init\ndata: {\"id\":\"c\"}\n\n"))
		_, _ = w.Write(body.Load().([]byte))
	}))
	f.Cleanup(srv.Close)
	c, err := xo.New(xo.Options{URL: srv.URL, Token: "t", Retries: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("event: update\ndata: {\"$subscription\":\"VM\",\"id\":\"a\",\"power_state\":\"Halted\"}\n\n"))
	f.Add([]byte("event: remove\ndata: {\"$subscription\":\"pool\",\"id\":\"p\"}\r\n\r\n: comment\n\nevent: ping\ndata: {\"ping\":1}\n\n"))
	f.Add([]byte("event: add\ndata: {\"$subscription\":\"host\",\ndata: \"id\":\"h\"}\n\n"))
	f.Add([]byte("event: init\ndata: {\"id\":\"again\"}\n\n"))
	f.Add([]byte(strings.Repeat("x", 70000)))
	f.Fuzz(func(t *testing.T, data []byte) {
		body.Store(data)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := c.Watch(ctx, xo.WatchOptions{IdleTimeout: time.Second}, func(e xo.Event) {
			switch {
			case e.VM != nil && e.VM.ID != "", e.Host != nil && e.Host.ID != "", e.Pool != nil && e.Pool.ID != "":
			default:
				t.Fatalf("event without object id: %+v", e)
			}
		})
		if err == nil {
			t.Fatal("Watch returned nil")
		}
	})
}
