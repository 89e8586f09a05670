package inventory

import (
	"hash/maphash"
	"iter"
	"maps"
)

// shardCount is the number of shards of a shardedMap: with 10,000 VMs, an event copies about
// 150 entries per index instead of 10,000.
const shardCount = 64

var shardSeed = maphash.MakeSeed()

func shardOf(k string) int { return int(maphash.String(shardSeed, k) % shardCount) }

// shardedMap is an immutable map split into shards, so that a changed copy (the next
// snapshot) shares every shard the change does not touch.
type shardedMap[V any] struct {
	shards *[shardCount]map[string]V
	n      int
}

// newShardedMap returns an empty map; sizeHint is the number of entries expected.
func newShardedMap[V any](sizeHint int) shardedMap[V] {
	var s [shardCount]map[string]V
	for i := range s {
		s[i] = make(map[string]V, sizeHint/shardCount)
	}
	return shardedMap[V]{shards: &s}
}

func (m shardedMap[V]) get(k string) V { return m.shards[shardOf(k)][k] }

func (m shardedMap[V]) len() int { return m.n }

// all yields every entry, shard by shard.
func (m shardedMap[V]) all() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for _, s := range m.shards {
			for k, v := range s {
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

// shardedWriter builds a changed copy of a shardedMap, copying each shard on its first change;
// the map it started from is left as it was.
type shardedWriter[V any] struct {
	m      shardedMap[V]
	own    bool // m.shards is this writer's array
	copied [shardCount]bool
}

// writer returns a writer that copies m's shards before changing them.
func writer[V any](m shardedMap[V]) *shardedWriter[V] { return &shardedWriter[V]{m: m} }

// ownWriter returns a writer that changes m in place: m must not be shared yet.
func ownWriter[V any](m shardedMap[V]) *shardedWriter[V] {
	w := &shardedWriter[V]{m: m, own: true}
	for i := range w.copied {
		w.copied[i] = true
	}
	return w
}

func (w *shardedWriter[V]) shard(k string) map[string]V {
	if !w.own {
		shards := *w.m.shards
		w.m.shards, w.own = &shards, true
	}
	i := shardOf(k)
	if !w.copied[i] {
		w.m.shards[i] = maps.Clone(w.m.shards[i])
		if w.m.shards[i] == nil {
			w.m.shards[i] = map[string]V{}
		}
		w.copied[i] = true
	}
	return w.m.shards[i]
}

func (w *shardedWriter[V]) get(k string) V { return w.m.get(k) }

func (w *shardedWriter[V]) set(k string, v V) {
	s := w.shard(k)
	if _, ok := s[k]; !ok {
		w.m.n++
	}
	s[k] = v
}

func (w *shardedWriter[V]) delete(k string) {
	if _, ok := w.m.shards[shardOf(k)][k]; !ok {
		return
	}
	delete(w.shard(k), k)
	w.m.n--
}
