package common

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRetries(t *testing.T) {
	r := NewRetries(NotYetBase, 5*time.Second)
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		if got := r.NotYet("a"); got != want {
			t.Errorf("NotYet #%d = %v, want %v", i+1, got, want)
		}
	}
	if got := r.NotYet("b"); got != time.Second {
		t.Errorf("another Node's first NotYet = %v, want 1s", got)
	}

	ctx := context.Background()
	nodes := schema.GroupResource{Resource: "nodes"}
	for i, err := range []error{
		apierrors.NewConflict(nodes, "a", errors.New("changed")),
		fmt.Errorf("patch node a: %w", apierrors.NewNotFound(nodes, "a")),
	} {
		res, got := r.HandleWriteError(ctx, "a", err)
		if want := 10 * time.Millisecond << i; got != nil || res.RequeueAfter != want {
			t.Errorf("HandleWriteError(%v) = %+v, %v; want a requeue after %v and no error", err, res, got, want)
		}
	}
	boom := fmt.Errorf("patch node a: %w", apierrors.NewForbidden(nodes, "a", errors.New("no")))
	if res, got := r.HandleWriteError(ctx, "a", boom); !errors.Is(got, boom) || res.RequeueAfter != 0 {
		t.Errorf("HandleWriteError(forbidden) = %+v, %v; want the error returned", res, got)
	}

	r.Forget("a")
	if got := r.NotYet("a"); got != time.Second {
		t.Errorf("NotYet after Forget = %v, want 1s", got)
	}
	if res, _ := r.HandleWriteError(ctx, "a", apierrors.NewConflict(nodes, "a", errors.New("changed"))); res.RequeueAfter != 10*time.Millisecond {
		t.Errorf("conflict after Forget: requeue after %v, want 10ms", res.RequeueAfter)
	}
}
