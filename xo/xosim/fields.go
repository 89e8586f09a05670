package xosim

import (
	"strings"
)

// XO builds collection entries with lodash's pick(object, fields.split(',')), so a field may be
// a property path: "CPUs.number" gives {"CPUs":{"number":2}}, "memory.dynamic[1]" gives
// {"memory":{"dynamic":[null,<max>]}}. A field absent from the object is left out. This file
// reproduces pick for JSON values.

// parseFields splits a fields parameter (comma-separated, names not trimmed, as XO does).
func parseFields(s string) []string {
	return strings.Split(s, ",")
}

// pick returns the picked object for obj (an object value) and the given fields.
func pick(obj any, fields []string) *ordObj {
	out := newOrdObj(len(fields) + 1)
	for _, f := range fields {
		keys := castPath(f, obj)
		if !hasPath(obj, keys) {
			continue
		}
		setPath(out, keys, getPath(obj, keys))
	}
	return out
}

// picker writes collection entries for a fields parameter: XO's pick(object, fields) with the
// href added last.
type picker struct {
	fields []string
	// direct is set when every field is a distinct single key (no path syntax) other than
	// "href": the entry is then written straight from the object, without building the picked
	// object, which matters when listing 100,000 VMs.
	direct bool
}

func newPicker(fields []string) *picker {
	seen := make(map[string]bool, len(fields))
	direct := true
	for _, f := range fields {
		if isDeepProp(f) || f == "href" || seen[f] {
			direct = false
		}
		seen[f] = true
	}
	return &picker{fields: fields, direct: direct}
}

// appendEntry appends the entry of obj to dst.
func (pk *picker) appendEntry(dst []byte, obj map[string]any, href string) []byte {
	if !pk.direct {
		out := pick(obj, pk.fields)
		out.set("href", href)
		return appendJSON(dst, out)
	}
	dst = append(dst, '{')
	for _, f := range pk.fields {
		v, ok := obj[f]
		if _, undef := v.(undefinedT); !ok || undef {
			continue
		}
		dst = appendString(dst, f)
		dst = append(dst, ':')
		dst = appendJSON(dst, v)
		dst = append(dst, ',')
	}
	dst = append(dst, `"href":`...)
	dst = appendString(dst, href)
	return append(dst, '}')
}

// castPath is lodash's castPath: a field that names a property of obj as is, or contains no
// path syntax, is a single key; otherwise it is parsed with stringToPath.
func castPath(f string, obj any) []string {
	if isPlainProp(f) || !isDeepProp(f) || jsHas(obj, f) {
		return []string{f}
	}
	return stringToPath(f)
}

// isPlainProp is lodash's /^\w*$/.
func isPlainProp(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		word := c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !word {
			return false
		}
	}
	return true
}

// isDeepProp is lodash's /\.|\[(?:[^[\]]*|(["'])(?:(?!\1)[^\\]|\\.)*?\1)\]/: a dot, or a
// bracket expression.
func isDeepProp(s string) bool {
	if strings.Contains(s, ".") {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '[' {
			continue
		}
		// [^[\]]* then ]
		j := i + 1
		for j < len(s) && s[j] != '[' && s[j] != ']' {
			j++
		}
		if j < len(s) && s[j] == ']' {
			return true
		}
		// quoted form
		if _, end, ok := bracketQuoted(s, i); ok && end > i {
			return true
		}
	}
	return false
}

// bracketQuoted matches ["..."] or ['...'] at s[i] (s[i] == '['); it returns the raw content
// and the index just past the closing bracket.
func bracketQuoted(s string, i int) (string, int, bool) {
	if i+1 >= len(s) || (s[i+1] != '"' && s[i+1] != '\'') {
		return "", 0, false
	}
	q := s[i+1]
	j := i + 2
	for j < len(s) {
		switch s[j] {
		case '\\':
			if j+1 >= len(s) {
				return "", 0, false
			}
			j += 2
			continue
		case q:
			if j+1 < len(s) && s[j+1] == ']' {
				return s[i+2 : j], j + 2, true
			}
			return "", 0, false
		}
		j++
	}
	return "", 0, false
}

// stringToPath is lodash's stringToPath (rePropName scanning): runs of characters other than
// ".", "[" and "]" are keys, [number] and ["quoted"] are keys, and an empty key is produced
// between consecutive separators.
func stringToPath(s string) []string {
	var out []string
	if strings.HasPrefix(s, ".") {
		out = append(out, "")
	}
	i := 0
	for i < len(s) {
		c := s[i]
		if c != '.' && c != '[' && c != ']' {
			j := i
			for j < len(s) && s[j] != '.' && s[j] != '[' && s[j] != ']' {
				j++
			}
			out = append(out, s[i:j])
			i = j
			continue
		}
		if c == '[' {
			if num, end, ok := bracketNumber(s, i); ok {
				out = append(out, num)
				i = end
				continue
			}
			if raw, end, ok := bracketQuoted(s, i); ok {
				out = append(out, unescapeLodash(raw))
				i = end
				continue
			}
		}
		// Empty match: at a "." or "[]" followed by ".", "[]" or the end.
		if c == '.' || strings.HasPrefix(s[i:], "[]") {
			rest := s[i+1:]
			if c == '[' {
				rest = s[i+2:]
			}
			if rest == "" || strings.HasPrefix(rest, ".") || strings.HasPrefix(rest, "[]") {
				out = append(out, "")
			}
		}
		i++
	}
	return out
}

// bracketNumber matches [-?\d+(\.\d+)?] at s[i].
func bracketNumber(s string, i int) (string, int, bool) {
	j := i + 1
	if j < len(s) && s[j] == '-' {
		j++
	}
	d := j
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == d {
		return "", 0, false
	}
	if j < len(s) && s[j] == '.' {
		k := j + 1
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k > j+1 {
			j = k
		}
	}
	if j < len(s) && s[j] == ']' {
		return s[i+1 : j], j + 1, true
	}
	return "", 0, false
}

// unescapeLodash is lodash's replace(/\\(\\)?/g, '$1').
func unescapeLodash(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			if i+1 < len(s) && s[i+1] == '\\' {
				b.WriteByte('\\')
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hasPath(obj any, keys []string) bool {
	if len(keys) == 0 {
		return false
	}
	cur := obj
	for _, k := range keys {
		if isNullish(cur) || !jsHas(cur, k) {
			return false
		}
		cur = jsGet(cur, k)
	}
	return true
}

func getPath(obj any, keys []string) any {
	cur := obj
	for _, k := range keys {
		if isNullish(cur) {
			return undefined
		}
		cur = jsGet(cur, k)
	}
	return cur
}

// setPath is lodash's baseSet on the picked result: intermediate containers are created as
// arrays when the next key is an index, objects otherwise. Values taken from the stored object
// are never modified: setting inside one of them is a no-op, since pick only sets values read
// from the same path.
func setPath(out *ordObj, keys []string, v any) {
	var container any = out
	for i, k := range keys {
		last := i == len(keys)-1
		switch c := container.(type) {
		case *ordObj:
			if last {
				c.set(k, v)
				return
			}
			next, _ := c.get(k)
			next = ensureContainer(next, keys[i+1])
			c.set(k, next)
			container = next
		case *jsArr:
			idx, ok := arrayIndex(k)
			if !ok {
				return // a named property on an array does not appear in JSON.
			}
			for len(c.elems) <= idx {
				c.elems = append(c.elems, nil)
			}
			if last {
				c.elems[idx] = v
				return
			}
			next := ensureContainer(c.elems[idx], keys[i+1])
			c.elems[idx] = next
			container = next
		default:
			return // inside a stored value: already holds v.
		}
	}
}

// ensureContainer keeps an existing object or array and replaces anything else by a new
// container suited to the next key.
func ensureContainer(v any, nextKey string) any {
	switch v.(type) {
	case *ordObj, *jsArr, map[string]any, []any:
		return v
	}
	if _, ok := arrayIndex(nextKey); ok {
		return &jsArr{}
	}
	return newOrdObj(1)
}
