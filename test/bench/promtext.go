package bench

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Sample is one sample of the Prometheus text exposition format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseMetrics reads the Prometheus text format (as served at /metrics by the API server and
// the controller). Comments and blank lines are skipped; a malformed sample line is an error
// naming its line number.
func ParseMetrics(r io.Reader) ([]Sample, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxBenchLine)
	var out []Sample
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		s, err := parseSample(text)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", line, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

func parseSample(text string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(text, "{ \t")
	if i <= 0 {
		return s, fmt.Errorf("no value in %q", text)
	}
	s.Name, text = text[:i], text[i:]
	if text[0] == '{' {
		rest, err := parseLabels(text[1:], s.Labels)
		if err != nil {
			return s, err
		}
		text = rest
	}
	fields := strings.Fields(text)
	if len(fields) < 1 || len(fields) > 2 {
		return s, fmt.Errorf("want a value and an optional timestamp after %s, got %q", s.Name, text)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("value of %s: %w", s.Name, err)
	}
	s.Value = v
	return s, nil
}

// parseLabels reads `name="value",...}` into m and returns what follows the closing brace.
func parseLabels(text string, m map[string]string) (string, error) {
	for {
		text = strings.TrimLeft(text, " ,")
		if strings.HasPrefix(text, "}") {
			return text[1:], nil
		}
		eq := strings.IndexByte(text, '=')
		if eq <= 0 || len(text) < eq+2 || text[eq+1] != '"' {
			return "", fmt.Errorf("bad label in %q", text)
		}
		name := strings.TrimSpace(text[:eq])
		text = text[eq+2:]
		var val strings.Builder
		closed := false
		for j := 0; j < len(text); j++ {
			c := text[j]
			if c == '\\' && j+1 < len(text) {
				j++
				switch text[j] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(text[j])
				}
				continue
			}
			if c == '"' {
				text, closed = text[j+1:], true
				break
			}
			val.WriteByte(c)
		}
		if !closed {
			return "", fmt.Errorf("unterminated value of label %s", name)
		}
		m[name] = val.String()
	}
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
