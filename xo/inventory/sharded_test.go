package inventory

import (
	"fmt"
	"maps"
	"testing"
)

// TestShardedMapCopyOnWrite checks that a writer's changes never show in the map it started
// from, and that both agree with a plain map.
func TestShardedMapCopyOnWrite(t *testing.T) {
	w := ownWriter(newShardedMap[int](0))
	want := map[string]int{}
	for i := range 1000 {
		k := fmt.Sprint("k", i)
		w.set(k, i)
		want[k] = i
	}
	base := w.m
	baseWant := maps.Clone(want)

	next := writer(base)
	for i := range 1000 {
		k := fmt.Sprint("k", i)
		switch i % 3 {
		case 0:
			next.delete(k)
			delete(want, k)
		case 1:
			next.set(k, -i)
			want[k] = -i
		}
	}
	next.set("new", 1)
	want["new"] = 1
	next.delete("absent")

	for name, c := range map[string]struct {
		m    shardedMap[int]
		want map[string]int
	}{"base": {base, baseWant}, "next": {next.m, want}} {
		got := maps.Collect(c.m.all())
		if !maps.Equal(got, c.want) || c.m.len() != len(c.want) {
			t.Errorf("%s: %d entries (len %d), want %d", name, len(got), c.m.len(), len(c.want))
		}
		for k, v := range c.want {
			if c.m.get(k) != v {
				t.Fatalf("%s: get(%q) = %d, want %d", name, k, c.m.get(k), v)
			}
		}
	}
}
