package bench

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one sample of the Prometheus text exposition format; a histogram or summary
// gives one per bucket or quantile and its _sum and _count.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseMetrics reads the Prometheus text format (as served at /metrics by the API server and
// the controller) with the Prometheus parser, and returns its samples in the order of their
// metric families' names.
func ParseMetrics(r io.Reader) ([]Sample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	var mfs []*dto.MetricFamily
	for _, name := range slices.Sorted(maps.Keys(families)) {
		mfs = append(mfs, families[name])
	}
	vec, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{}, mfs...)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	out := make([]Sample, 0, len(vec))
	for _, s := range vec {
		labels := make(map[string]string, len(s.Metric))
		for k, v := range s.Metric {
			labels[string(k)] = string(v)
		}
		delete(labels, model.MetricNameLabel)
		out = append(out, Sample{Name: string(s.Metric[model.MetricNameLabel]), Labels: labels, Value: float64(s.Value)})
	}
	return out, nil
}

// Sum adds the values of the samples named name whose labels include every pair of match.
func Sum(samples []Sample, name string, match map[string]string) float64 {
	var t float64
	for _, s := range samples {
		if s.Name != name || !hasLabels(s, match) {
			continue
		}
		t += s.Value
	}
	return t
}

func hasLabels(s Sample, match map[string]string) bool {
	for k, v := range match {
		if s.Labels[k] != v {
			return false
		}
	}
	return true
}

// MeanDelta returns the mean of a histogram or summary between two readings: the growth of
// name_sum over the growth of name_count, over the series whose labels include match. ok is
// false when nothing was observed in between.
func MeanDelta(before, after []Sample, name string, match map[string]string) (mean float64, n float64, ok bool) {
	n = Sum(after, name+"_count", match) - Sum(before, name+"_count", match)
	if n <= 0 {
		return 0, 0, false
	}
	return (Sum(after, name+"_sum", match) - Sum(before, name+"_sum", match)) / n, n, true
}

// APIRequests groups the API server's apiserver_request_total samples for the given resources
// by "VERB resource[/subresource]".
func APIRequests(samples []Sample, resources ...string) map[string]int64 {
	out := map[string]int64{}
	for _, s := range samples {
		if s.Name != "apiserver_request_total" {
			continue
		}
		res := s.Labels["resource"]
		want := false
		for _, r := range resources {
			want = want || r == res
		}
		if !want {
			continue
		}
		if sub := s.Labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		out[s.Labels["verb"]+" "+res] += int64(s.Value)
	}
	return out
}

// Delta returns after minus before, keeping only keys that changed.
func Delta(before, after map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Writes keeps the write verbs (POST, PUT, PATCH, DELETE, DELETECOLLECTION, APPLY) of an
// APIRequests map.
func Writes(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		verb, _, _ := strings.Cut(k, " ")
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
			out[k] = v
		}
	}
	return out
}

// APIResponses groups the API server's apiserver_request_total samples answered with this
// HTTP status code (e.g. "409") by "VERB resource[/subresource]", every resource included.
func APIResponses(samples []Sample, code string) map[string]int64 {
	out := map[string]int64{}
	for _, s := range samples {
		if s.Name != "apiserver_request_total" || s.Labels["code"] != code {
			continue
		}
		res := s.Labels["resource"]
		if sub := s.Labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		out[s.Labels["verb"]+" "+res] += int64(s.Value)
	}
	return out
}

// QuantileDelta estimates the q-quantile of the observations a histogram received between two
// scrapes, from the increase of its cumulative buckets (<name>_bucket, label le), interpolating
// linearly inside the bucket as Prometheus' histogram_quantile does; ok is false without
// observations. An estimate past the last finite bucket is that bucket's bound.
func QuantileDelta(before, after []Sample, name string, match map[string]string, q float64) (v float64, ok bool) {
	counts := map[float64]float64{}
	add := func(samples []Sample, sign float64) {
		for _, s := range samples {
			if s.Name != name+"_bucket" || !hasLabels(s, match) {
				continue
			}
			le, err := strconv.ParseFloat(s.Labels["le"], 64)
			if err != nil {
				continue
			}
			counts[le] += sign * s.Value
		}
	}
	add(after, 1)
	add(before, -1)
	bounds := slices.Sorted(maps.Keys(counts))
	if len(bounds) == 0 || counts[bounds[len(bounds)-1]] <= 0 {
		return 0, false
	}
	rank := q * counts[bounds[len(bounds)-1]]
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		if counts[le] >= rank {
			if math.IsInf(le, 1) {
				return lower, true
			}
			return lower + (le-lower)*(rank-below)/(counts[le]-below), true
		}
		lower, below = le, counts[le]
	}
	return lower, true
}
