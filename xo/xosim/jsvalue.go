package xosim

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
)

// XO evaluates filters and picks fields with JavaScript semantics. These helpers give the
// JSON-shaped Go values (nil, bool, float64, string, []any, map[string]any) the JavaScript
// behaviour that matters there: property access, truthiness and conversion to number.

// undefinedT is JavaScript's undefined: the value of a missing property.
type undefinedT struct{}

var undefined = undefinedT{}

// isNullish reports whether v is null or undefined (JavaScript's v == null).
func isNullish(v any) bool {
	switch v.(type) {
	case nil, undefinedT:
		return true
	}
	return false
}

// jsGet returns v[name] for a JSON value: own keys of objects, "length" and indexes of arrays
// and strings (strings are indexed by UTF-16 code unit, as in JavaScript). Anything else is
// undefined. Inherited prototype members (toString, constructor...) are not modelled.
func jsGet(v any, name string) any {
	switch x := v.(type) {
	case map[string]any:
		if val, ok := x[name]; ok {
			return val
		}
	case *ordObj:
		if val, ok := x.vals[name]; ok {
			return val
		}
	case []any:
		if name == "length" {
			return float64(len(x))
		}
		if i, ok := arrayIndex(name); ok && i < len(x) {
			return x[i]
		}
	case string:
		if name == "length" {
			return float64(utf16Len(x))
		}
		if i, ok := arrayIndex(name); ok {
			u := utf16.Encode([]rune(x))
			if i < len(u) {
				return string(utf16.Decode(u[i : i+1]))
			}
		}
	}
	return undefined
}

// jsHas reports whether name is in v (JavaScript's `name in Object(v)`), with the same limits
// as jsGet.
func jsHas(v any, name string) bool {
	switch x := v.(type) {
	case map[string]any:
		_, ok := x[name]
		return ok
	case *ordObj:
		_, ok := x.vals[name]
		return ok
	case []any:
		if name == "length" {
			return true
		}
		i, ok := arrayIndex(name)
		return ok && i < len(x)
	case string:
		if name == "length" {
			return true
		}
		i, ok := arrayIndex(name)
		return ok && i < utf16Len(x)
	}
	return false
}

// arrayIndex parses a canonical array index ("0", "17"; not "01", "-1" or "1.0").
func arrayIndex(s string) (int, bool) {
	if s == "" || len(s) > 15 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// jsTruthy is JavaScript's Boolean(v).
func jsTruthy(v any) bool {
	switch x := v.(type) {
	case nil, undefinedT:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && !math.IsNaN(x)
	case int:
		return x != 0
	case int64:
		return x != 0
	case string:
		return x != ""
	}
	return true // objects and arrays, even empty ones.
}

// jsToNumber converts a value to a number the way a JavaScript relational comparison does
// (ToPrimitive, then ToNumber): null is 0, undefined NaN, booleans 0/1, strings are parsed,
// arrays go through their join(","), plain objects are NaN.
func jsToNumber(v any) float64 {
	switch x := v.(type) {
	case nil:
		return 0
	case undefinedT:
		return math.NaN()
	case bool:
		if x {
			return 1
		}
		return 0
	case float64:
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case string:
		return jsStringToNumber(x)
	case []any:
		return jsStringToNumber(jsArrayJoin(x))
	}
	return math.NaN()
}

// jsArrayJoin is Array.prototype.join(",") applied to JSON values, as ToPrimitive does.
func jsArrayJoin(a []any) string {
	var b strings.Builder
	for i, e := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		switch x := e.(type) {
		case nil, undefinedT:
		case bool:
			b.WriteString(strconv.FormatBool(x))
		case float64:
			b.Write(appendNumber(nil, x))
		case int:
			b.WriteString(strconv.Itoa(x))
		case int64:
			b.WriteString(strconv.FormatInt(x, 10))
		case string:
			b.WriteString(x)
		case []any:
			b.WriteString(jsArrayJoin(x))
		default:
			b.WriteString("[object Object]")
		}
	}
	return b.String()
}

func isJSWhitespace(r rune) bool {
	return unicode.IsSpace(r) || r == '\ufeff' || r == '\u2028' || r == '\u2029'
}

// jsStringToNumber is JavaScript's Number(string): surrounding white space is ignored, the
// empty string is 0, decimal literals with an optional sign and exponent, "Infinity", and
// unsigned 0x/0o/0b integers are accepted; anything else is NaN.
func jsStringToNumber(s string) float64 {
	s = strings.TrimFunc(s, isJSWhitespace)
	if s == "" {
		return 0
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			return parseRadixInt(s[2:], base)
		}
	}
	sign := 1.0
	body := s
	switch body[0] {
	case '+':
		body = body[1:]
	case '-':
		sign = -1
		body = body[1:]
	}
	if body == "Infinity" {
		return sign * math.Inf(1)
	}
	if !isDecimalLiteral(body) {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(body, 64)
	if err != nil {
		// Out of range: ParseFloat returns ±Inf with ErrRange, which is what JavaScript gives.
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return sign * f
		}
		return math.NaN()
	}
	return sign * f
}

// isDecimalLiteral checks ECMAScript's StrUnsignedDecimalLiteral (without Infinity):
// digits [. digits] [e sign digits] or . digits [e sign digits].
func isDecimalLiteral(s string) bool {
	i, n := 0, len(s)
	intDigits := 0
	for i < n && s[i] >= '0' && s[i] <= '9' {
		i++
		intDigits++
	}
	fracDigits := 0
	if i < n && s[i] == '.' {
		i++
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
			fracDigits++
		}
	}
	if intDigits == 0 && fracDigits == 0 {
		return false
	}
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < n && (s[i] == '+' || s[i] == '-') {
			i++
		}
		expDigits := 0
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
			expDigits++
		}
		if expDigits == 0 {
			return false
		}
	}
	return i == n
}

func parseRadixInt(s string, base int) float64 {
	if s == "" {
		return math.NaN()
	}
	f := 0.0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d int
		switch {
		case c >= '0' && c <= '9':
			d = int(c - '0')
		case c >= 'a' && c <= 'z':
			d = int(c-'a') + 10
		case c >= 'A' && c <= 'Z':
			d = int(c-'A') + 10
		default:
			return math.NaN()
		}
		if d >= base {
			return math.NaN()
		}
		f = f*float64(base) + float64(d)
	}
	return f
}

// jsNumberValue returns v as a number when v is a JavaScript number (typeof v === "number").
func jsNumberValue(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}
