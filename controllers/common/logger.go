package common

import "github.com/go-logr/logr"

// lazyLogger returns l with its WithValues deferred until a line is written. Every reconcile
// adds values to its logger (the Node; controller-runtime adds the reconcile id), and the zap
// backend encodes added values at once, into a buffer of its own, whether or not anything is
// logged: a quiet look at 5,000 Nodes allocated 20 MB that way. Deferred, the values cost a
// slice append, and are encoded only with a line that is written.
func lazyLogger(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if sink == nil {
		return l
	}
	// One frame more between the caller and the backend: lazySink's Info or Error.
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1)
	}
	return logr.New(lazySink{sink: sink})
}

// lazySink is the logr.LogSink of lazyLogger: the backend's sink plus the values added since.
type lazySink struct {
	sink logr.LogSink
	kv   []any
}

// Init does nothing: the backend's sink was initialized by the Logger it came from.
func (s lazySink) Init(logr.RuntimeInfo) {}

func (s lazySink) Enabled(level int) bool { return s.sink.Enabled(level) }

func (s lazySink) Info(level int, msg string, kv ...any) {
	s.sink.Info(level, msg, s.with(kv)...)
}

func (s lazySink) Error(err error, msg string, kv ...any) {
	s.sink.Error(err, msg, s.with(kv)...)
}

func (s lazySink) WithValues(kv ...any) logr.LogSink {
	return lazySink{sink: s.sink, kv: s.with(kv)}
}

func (s lazySink) WithName(name string) logr.LogSink {
	return lazySink{sink: s.sink.WithName(name), kv: s.kv}
}

func (s lazySink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.sink.(logr.CallDepthLogSink); ok {
		return lazySink{sink: cd.WithCallDepth(depth), kv: s.kv}
	}
	return s
}

// with returns the deferred values followed by kv, in a new slice unless kv is empty.
func (s lazySink) with(kv []any) []any {
	if len(kv) == 0 {
		return s.kv
	}
	out := make([]any, 0, len(s.kv)+len(kv))
	return append(append(out, s.kv...), kv...)
}
