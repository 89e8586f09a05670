package common

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
)

// TestLazyLogger: deferred values reach the backend in order with every line, names too, and
// the caller is the line that logged, not the wrapper.
func TestLazyLogger(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{LogCaller: funcr.All, Verbosity: 1})
	l := lazyLogger(base).WithValues("controller", "c").WithName("n").WithValues("node", "w1")
	l.Info("hello", "k", 1)
	l.V(1).Info("debug")
	l.V(2).Info("dropped")
	l.Error(errors.New("boom"), "failed")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3: %q", len(lines), lines)
	}
	for i, want := range []string{`"controller"="c" "node"="w1" "k"=1`, `"controller"="c" "node"="w1"`, `"controller"="c" "node"="w1"`} {
		if !strings.Contains(lines[i], want) || !strings.HasPrefix(lines[i], "n ") || !strings.Contains(lines[i], "logger_test.go") {
			t.Errorf("line %d = %s, want the name n, %s and the caller logger_test.go", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[2], `"error"="boom"`) {
		t.Errorf("error line %s", lines[2])
	}
}
