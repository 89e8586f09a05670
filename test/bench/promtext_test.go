package bench

import (
	"math"
	"strings"
	"testing"
)

func TestQuantileDelta(t *testing.T) {
	parse := func(text string) []Sample {
		s, err := ParseMetrics(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const head = "# TYPE d histogram\n"
	before := parse(head + `d_bucket{op="CREATE",le="0.1"} 10
d_bucket{op="CREATE",le="0.5"} 10
d_bucket{op="CREATE",le="1"} 10
d_bucket{op="CREATE",le="+Inf"} 10
d_sum{op="CREATE"} 0.5
d_count{op="CREATE"} 10
`)
	// 100 new observations: 50 under 0.1 s, 40 in (0.1, 0.5], 10 in (0.5, 1].
	after := parse(head + `d_bucket{op="CREATE",le="0.1"} 60
d_bucket{op="CREATE",le="0.5"} 100
d_bucket{op="CREATE",le="1"} 110
d_bucket{op="CREATE",le="+Inf"} 110
d_sum{op="CREATE"} 20
d_count{op="CREATE"} 110
`)
	for _, tt := range []struct{ q, want float64 }{{0.5, 0.1}, {0.7, 0.3}, {0.99, 0.95}} {
		got, ok := QuantileDelta(before, after, "d", map[string]string{"op": "CREATE"}, tt.q)
		if !ok || math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("q%v = %v, %v; want %v", tt.q, got, ok, tt.want)
		}
	}
	if _, ok := QuantileDelta(after, after, "d", nil, 0.99); ok {
		t.Error("a quantile without observations")
	}
}
