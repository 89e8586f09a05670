package app

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Release of the heap a burst leaves behind.
//
// A burst (the start-up look at every Node, the wave when pools turn trusted, thousands of
// Nodes created at once) grows the heap to the GC's goal, 1.5 times the live data (GOGC=50).
// Once the process is at rest the heap stays there: it allocates too little to reach the goal,
// so no collection frees the burst's garbage until the runtime forces one (every 2 minutes),
// and the runtime's scavenger returns to the OS only what exceeds the goal, so the pages that
// collection frees stay resident for reuse. With 5,000 Nodes that is about 10 MiB, an eighth of
// the resident set, held for nothing until the next burst.
//
// releaseHeap looks every releaseEvery; when the process allocated less than quietAlloc since
// the last look and the heap holds more than the larger of releaseMin and a quarter of the live
// data beyond the live data, it collects and returns the free pages (debug.FreeOSMemory: one
// full collection, which the quiet process has time for). The live data is the runtime's figure
// from the last collection: one that ran during a burst counted what the burst held then as
// live (during a relist of 100,000 VMs, the old snapshot and the new listing at once: twice the
// inventory), so that the heap looks all live once the burst's data is garbage. So when the last
// collection ran while the process was busy, the first quiet look collects anyway, once. The
// peak during a burst is unchanged; what the process keeps at rest is the live data and what it
// allocates between collections.
// Nothing in client-go, controller-runtime or the runtime does this (the runtime's own knobs,
// GOGC and GOMEMLIMIT, bound the heap during the burst as well, at a CPU cost there).
const (
	releaseEvery = 5 * time.Second
	quietAlloc   = 2 << 20
	releaseMin   = 8 << 20
)

// heapSamples are the runtime/metrics releaseHeap reads.
var heapSamples = []string{
	"/gc/heap/allocs:bytes",              // allocated since start
	"/gc/heap/live:bytes",                // live data at the last collection
	"/memory/classes/heap/objects:bytes", // objects, live or not yet collected
	"/memory/classes/heap/unused:bytes",  // free space in spans holding objects
	"/memory/classes/heap/free:bytes",    // free pages not returned to the OS
	"/gc/cycles/total:gc-cycles",         // collections since start
}

// heapState is one reading of heapSamples.
type heapState struct {
	allocs, live, objects, unused, free, cycles uint64
}

// newHeapSamples returns the samples readHeap fills.
func newHeapSamples() []metrics.Sample {
	s := make([]metrics.Sample, len(heapSamples))
	for i, name := range heapSamples {
		s[i].Name = name
	}
	return s
}

// readHeap reads s (from newHeapSamples).
func readHeap(s []metrics.Sample) heapState {
	metrics.Read(s)
	return heapState{
		allocs: s[0].Value.Uint64(), live: s[1].Value.Uint64(),
		objects: s[2].Value.Uint64(), unused: s[3].Value.Uint64(), free: s[4].Value.Uint64(),
		cycles: s[5].Value.Uint64(),
	}
}

// excess is the resident heap beyond the live data.
func (h heapState) excess() uint64 {
	held := h.objects + h.unused + h.free
	if held < h.live {
		return 0
	}
	return held - h.live
}

// busy reports whether the process allocated quietAlloc or more from prev to now.
func busy(prev, now heapState) bool { return now.allocs-prev.allocs >= quietAlloc }

// shouldRelease reports whether, from prev to now, the process was quiet and either holds
// enough heap beyond its live data to be worth a collection, or the live figure is stale (the
// last collection ran while the process was busy).
func shouldRelease(prev, now heapState, staleLive bool) bool {
	return !busy(prev, now) && (staleLive || now.excess() > max(releaseMin, now.live/4))
}

// releaseHeap returns the heap of bursts to the OS (see above) until ctx ends, looking every
// period.
func releaseHeap(ctx context.Context, log logr.Logger, period time.Duration) {
	samples := newHeapSamples()
	// wait.UntilWithContext looks at once: from the zero reading, that first look only reads,
	// since the process has allocated more than quietAlloc by then.
	var prev heapState
	staleLive := false
	wait.UntilWithContext(ctx, func(context.Context) {
		now := readHeap(samples)
		if now.cycles != prev.cycles {
			staleLive = busy(prev, now)
		}
		if shouldRelease(prev, now, staleLive) {
			debug.FreeOSMemory()
			after := readHeap(samples)
			log.V(1).Info("Returned the heap of a burst to the OS", "excessBefore", now.excess(), "excessAfter", after.excess(), "live", after.live)
			now, staleLive = after, false
		}
		prev = now
	}, period)
}
