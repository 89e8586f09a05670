package node

import "strings"

// forEachCSV calls fn for every non-empty, space-trimmed item of a comma-separated list,
// without allocating.
func forEachCSV(s string, fn func(string)) {
	for s != "" {
		item := s
		if i := strings.IndexByte(s, ','); i >= 0 {
			item, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if item = strings.TrimSpace(item); item != "" {
			fn(item)
		}
	}
}
