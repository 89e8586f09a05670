package xosim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The simulator keeps XO objects as JSON-shaped Go values: nil, bool, float64, string, []any,
// map[string]any. Output is written by appendJSON, which writes what JavaScript's
// JSON.stringify writes for the same value (no HTML escaping, JavaScript number formatting),
// except that map keys come out sorted, since Go maps have no insertion order.

// ordObj is a JSON object that keeps its keys in insertion order, as JavaScript objects do.
// The simulator builds picked objects (fields=...), event payloads and error bodies with it.
type ordObj struct {
	keys []string
	vals map[string]any
}

func newOrdObj(n int) *ordObj {
	return &ordObj{keys: make([]string, 0, n), vals: make(map[string]any, n)}
}

// set adds or replaces key; a new key goes last.
func (o *ordObj) set(key string, v any) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

func (o *ordObj) get(key string) (any, bool) {
	v, ok := o.vals[key]
	return v, ok
}

// jsArr is a growable JSON array used while building picked objects; unset slots are holes,
// written as null like JSON.stringify writes them.
type jsArr struct {
	elems []any
}

// kv builds an ordObj from alternating keys and values.
func kv(pairs ...any) *ordObj {
	o := newOrdObj(len(pairs) / 2)
	for i := 0; i+1 < len(pairs); i += 2 {
		k, _ := pairs[i].(string)
		o.set(k, pairs[i+1])
	}
	return o
}

// rawJSON is pre-encoded compact JSON, written as is.
type rawJSON []byte

// marshalCompact encodes v as compact JSON.
func marshalCompact(v any) []byte {
	return appendJSON(nil, v)
}

// marshalPretty encodes v the way JSON.stringify(v, null, 2) does.
func marshalPretty(v any) []byte {
	compact := appendJSON(nil, v)
	var buf bytes.Buffer
	buf.Grow(len(compact) * 2)
	if err := json.Indent(&buf, compact, "", "  "); err != nil {
		// appendJSON always writes valid JSON; keep the compact form should that ever change.
		return compact
	}
	return buf.Bytes()
}

// appendJSON appends the compact JSON encoding of v to dst.
func appendJSON(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case undefinedT:
		return append(dst, "null"...)
	case bool:
		if x {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case float64:
		return appendNumber(dst, x)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case string:
		return appendString(dst, x)
	case rawJSON:
		return append(dst, x...)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSON(dst, e)
		}
		return append(dst, ']')
	case []string:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, e)
		}
		return append(dst, ']')
	case *jsArr:
		return appendJSON(dst, x.elems)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		first := true
		for _, k := range keys {
			if _, undef := x[k].(undefinedT); undef {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendJSON(dst, x[k])
		}
		return append(dst, '}')
	case map[string]string:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendString(dst, x[k])
		}
		return append(dst, '}')
	case *ordObj:
		dst = append(dst, '{')
		first := true
		for _, k := range x.keys {
			val := x.vals[k]
			if _, undef := val.(undefinedT); undef {
				continue // JSON.stringify drops undefined properties.
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendJSON(dst, val)
		}
		return append(dst, '}')
	default:
		// Values of other types only come from callers' Extra maps, which are normalized
		// through encoding/json before use; this is a last resort.
		b, err := json.Marshal(x)
		if err != nil {
			return append(dst, "null"...)
		}
		return append(dst, b...)
	}
}

// appendNumber writes f as JavaScript's Number#toString does (encoding/json's float format
// follows the same ECMAScript rules); NaN and infinities become null, as in JSON.stringify.
func appendNumber(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == 0 {
		return append(dst, '0') // JSON.stringify(-0) is "0".
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as JavaScript writes it.
		m := len(dst) - n
		if m >= 4 && dst[len(dst)-4] == 'e' && dst[len(dst)-3] == '-' && dst[len(dst)-2] == '0' {
			dst[len(dst)-2] = dst[len(dst)-1]
			dst = dst[:len(dst)-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string the way JSON.stringify does: only '"', '\\' and
// control characters are escaped. Invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// normalizeJSON turns an arbitrary Go value into the JSON-shaped form the store uses, through
// encoding/json. It is used for the free-form Extra maps of the specs.
func normalizeJSON(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// indentJSON writes src (compact JSON) indented like JSON.stringify(v, null, 2).
func indentJSON(dst *bytes.Buffer, src []byte) error {
	return json.Indent(dst, src, "", "  ")
}

// decodeOrdered decodes JSON keeping object key order (objects become *ordObj). Invalid input
// gives nil.
func decodeOrdered(data []byte) any {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeOrderedValue(dec)
	if err != nil {
		return nil
	}
	return v
}

func decodeOrderedValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := newOrdObj(4)
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := kt.(string)
				val, err := decodeOrderedValue(dec)
				if err != nil {
					return nil, err
				}
				obj.set(key, val)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				val, err := decodeOrderedValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, val)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected delimiter %v", t)
	case json.Number:
		f, err := t.Float64()
		if err != nil {
			return nil, err
		}
		return f, nil
	default:
		return t, nil
	}
}
