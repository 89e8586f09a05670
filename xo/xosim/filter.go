package xosim

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode"
)

// This file implements XO's filter language, the "complex matcher"
// (packages/complex-matcher/index.js in vatesfr/xen-orchestra), with the same grammar, the same
// backtracking and the same error messages:
//
//	default  = ws term* EOF
//	term     = ( "(" ws term+ ")" | "|" ws "(" ws term+ ")" | "!" ws term
//	           | /[<>]=?/ rawString                     (numeric comparison)
//	           | "[resolve]" ":" ws term | "[resolve:all]" ":" ws term
//	           | property ws ":" ws term | property "?" | value ) ws
//	property = quotedString | rawString
//	value    = quotedString | regex | globPattern
//
// Raw strings hold digits, letters (characters that have a case), "_", "-", "." and "$"; a glob
// pattern may also hold "*". Anything else (spaces, ":", "=", "/", "@", "+", ",", ...) must be
// inside double quotes. A syntax error is always reported as XO does: "parse error: expected end
// of input at position N", N counting UTF-16 code units.
//
// There is no "=" operator: CPUs:max:=4 is a parse error in XO too; CPUs:max:4 matches the
// number 4 (and strings containing "4").
//
// Matching follows the JavaScript code: unquoted or quoted strings are case-insensitive
// substring matches applied recursively to arrays and objects; numbers also match equal
// numbers; "*" globs and /regex/ (flag i only) test strings, recursively too; comparisons
// convert the value to a number; "prop?" tests truthiness; a missing property is undefined.
//
// Known differences: JavaScript regular expressions are translated to Go's RE2 syntax, so
// look-arounds and back-references are rejected (400) where XO would accept them; "[resolve]"
// terms parse but, as in XO's REST API (which passes no resolver), fail when evaluated.

// maxFilterDepth bounds the nesting of terms. XO's recursive parser runs out of JavaScript
// stack around this depth and reports V8's message, which this mirrors.
const maxFilterDepth = 1000

// FilterError is a filter that XO refuses: Message is XO's error text (the "error" of its 400
// body).
type FilterError struct {
	Message string
}

func (e *FilterError) Error() string { return e.Message }

// Matcher is a parsed filter.
type Matcher struct {
	root cmNode
	src  string
}

// ParseFilter parses a filter the way XO's complex-matcher does. A nil error means the filter
// is valid; otherwise the error is a *FilterError carrying XO's message.
func ParseFilter(s string) (*Matcher, error) {
	p := newCMParser(s)
	root, err := p.parse()
	if err != nil {
		return nil, err
	}
	return &Matcher{root: root, src: s}, nil
}

// String returns the filter source.
func (m *Matcher) String() string { return m.src }

// Match reports whether the JSON-shaped value v (typically a map[string]any) matches. err is
// non-nil when evaluation fails the way it fails in XO ("[resolve] requires a resolver").
func (m *Matcher) Match(v any) (bool, error) {
	var ctx matchCtx
	ok := m.root.match(v, &ctx)
	if ctx.err != nil {
		return false, ctx.err
	}
	return ok, nil
}

type matchCtx struct {
	err error
}

// cmNode is a node of the parsed filter.
type cmNode interface {
	match(v any, ctx *matchCtx) bool
}

type nullNode struct{}

func (nullNode) match(any, *matchCtx) bool { return true }

type andNode struct{ children []cmNode }

func (n *andNode) match(v any, ctx *matchCtx) bool {
	for _, c := range n.children {
		if !c.match(v, ctx) {
			return false
		}
	}
	return true
}

type orNode struct{ children []cmNode }

func (n *orNode) match(v any, ctx *matchCtx) bool {
	for _, c := range n.children {
		if c.match(v, ctx) {
			return true
		}
	}
	return false
}

type notNode struct{ child cmNode }

func (n *notNode) match(v any, ctx *matchCtx) bool { return !n.child.match(v, ctx) }

type comparisonNode struct {
	op    string
	value float64
}

func (n *comparisonNode) match(v any, _ *matchCtx) bool {
	a := jsToNumber(v)
	switch n.op {
	case ">":
		return a > n.value
	case ">=":
		return a >= n.value
	case "<":
		return a < n.value
	default: // "<="
		return a <= n.value
	}
}

// someChild applies f to the elements of an array or the values of an object (lodash some).
func someChild(v any, f func(any) bool) bool {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if f(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if f(e) {
				return true
			}
		}
	case *ordObj:
		for _, k := range x.keys {
			if f(x.vals[k]) {
				return true
			}
		}
	}
	return false
}

type stringNode struct{ lc string }

func (n *stringNode) match(v any, ctx *matchCtx) bool {
	if s, ok := v.(string); ok {
		return strings.Contains(strings.ToLower(s), n.lc)
	}
	return someChild(v, func(e any) bool { return n.match(e, ctx) })
}

type numberOrStringNode struct {
	lc  string
	num float64
}

func (n *numberOrStringNode) match(v any, ctx *matchCtx) bool {
	if f, ok := jsNumberValue(v); ok {
		return f == n.num
	}
	if s, ok := v.(string); ok {
		return strings.Contains(strings.ToLower(s), n.lc)
	}
	return someChild(v, func(e any) bool { return n.match(e, ctx) })
}

type regexNode struct{ re *regexp.Regexp }

func (n *regexNode) match(v any, ctx *matchCtx) bool {
	if s, ok := v.(string); ok {
		return n.re.MatchString(s)
	}
	return someChild(v, func(e any) bool { return n.match(e, ctx) })
}

type propertyNode struct {
	name  string
	child cmNode
}

func (n *propertyNode) match(v any, ctx *matchCtx) bool {
	return !isNullish(v) && n.child.match(jsGet(v, n.name), ctx)
}

type truthyNode struct{ name string }

func (n *truthyNode) match(v any, _ *matchCtx) bool {
	return !isNullish(v) && jsTruthy(jsGet(v, n.name))
}

type resolveNode struct{ child cmNode }

func (n *resolveNode) match(_ any, ctx *matchCtx) bool {
	if ctx.err == nil {
		ctx.err = &FilterError{Message: "[resolve] requires a resolver"}
	}
	return false
}

// --- parser -------------------------------------------------------------------------------

type cmParser struct {
	in    []rune
	pos16 []int // pos16[i]: UTF-16 offset of rune i; pos16[len(in)] is the total length.
	depth int
	// err is an exception thrown while parsing (not a grammar failure): it aborts the parse,
	// as a JavaScript throw escapes the combinators.
	err error
}

func newCMParser(s string) *cmParser {
	in := []rune(s)
	pos16 := make([]int, len(in)+1)
	n := 0
	for i, r := range in {
		pos16[i] = n
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	pos16[len(in)] = n
	return &cmParser{in: in, pos16: pos16}
}

func (p *cmParser) position(pos int) int {
	if pos >= len(p.pos16) {
		return p.pos16[len(p.pos16)-1] + (pos - len(p.in))
	}
	return p.pos16[pos]
}

func (p *cmParser) parse() (cmNode, error) {
	pos, _ := p.ws(0)
	var terms []cmNode
	for {
		n, np, ok := p.term(pos)
		if p.err != nil {
			return nil, p.err
		}
		if !ok {
			break
		}
		terms = append(terms, n)
		pos = np
	}
	if pos < len(p.in) {
		return nil, &FilterError{Message: fmt.Sprintf("parse error: expected end of input at position %d", p.position(pos))}
	}
	switch len(terms) {
	case 0:
		return nullNode{}, nil
	case 1:
		return terms[0], nil
	}
	return &andNode{children: terms}, nil
}

// ws skips white space (JavaScript's \s). Like a sticky regular expression it fails when pos
// is past the end of the input, which a quoted string ending in a lone backslash can cause.
func (p *cmParser) ws(pos int) (int, bool) {
	if pos > len(p.in) {
		return pos, false
	}
	for pos < len(p.in) && isJSWhitespace(p.in[pos]) {
		pos++
	}
	return pos, true
}

func (p *cmParser) text(pos int, t string) (int, bool) {
	for _, r := range t {
		if pos >= len(p.in) || p.in[pos] != r {
			return pos, false
		}
		pos++
	}
	return pos, true
}

// term parses one term followed by white space.
func (p *cmParser) term(pos int) (cmNode, int, bool) {
	if p.depth >= maxFilterDepth {
		p.err = &FilterError{Message: "Maximum call stack size exceeded"}
		return nil, pos, false
	}
	p.depth++
	defer func() { p.depth-- }()

	n, np, ok := p.termAlt(pos)
	if !ok || p.err != nil {
		return nil, pos, false
	}
	np, ok = p.ws(np)
	if !ok {
		return nil, pos, false
	}
	return n, np, true
}

func (p *cmParser) termAlt(pos int) (cmNode, int, bool) {
	// "(" ws term+ ")"
	if np, ok := p.text(pos, "("); ok {
		np, _ = p.ws(np)
		if children, np2, ok := p.termsThenClose(np); ok {
			return newAnd(children), np2, true
		}
		if p.err != nil {
			return nil, pos, false
		}
	}
	// "|" ws "(" ws term+ ")"
	if np, ok := p.text(pos, "|"); ok {
		np, _ = p.ws(np)
		if np, ok = p.text(np, "("); ok {
			np, _ = p.ws(np)
			if children, np2, ok := p.termsThenClose(np); ok {
				return newOr(children), np2, true
			}
			if p.err != nil {
				return nil, pos, false
			}
		}
	}
	// "!" ws term
	if np, ok := p.text(pos, "!"); ok {
		np, _ = p.ws(np)
		if child, np2, ok := p.term(np); ok {
			return &notNode{child: child}, np2, true
		}
		if p.err != nil {
			return nil, pos, false
		}
	}
	// /[<>]=?/ rawString
	if pos < len(p.in) && (p.in[pos] == '<' || p.in[pos] == '>') {
		op := string(p.in[pos])
		np := pos + 1
		if np < len(p.in) && p.in[np] == '=' {
			op += "="
			np++
		}
		if raw, np2, ok := p.rawString(np); ok {
			f := jsStringToNumber(raw)
			if math.IsNaN(f) {
				p.err = &FilterError{Message: "value must be a number"}
				return nil, pos, false
			}
			return &comparisonNode{op: op, value: f}, np2, true
		}
	}
	// "[resolve]" ":" ws term, "[resolve:all]" ":" ws term
	for _, kw := range []string{"[resolve]", "[resolve:all]"} {
		if np, ok := p.text(pos, kw); ok {
			if np, ok = p.text(np, ":"); ok {
				np, _ = p.ws(np)
				if child, np2, ok := p.term(np); ok {
					return &resolveNode{child: child}, np2, true
				}
				if p.err != nil {
					return nil, pos, false
				}
			}
		}
	}
	// property ws ":" ws term
	if name, np, ok := p.property(pos); ok {
		if np2, ok := p.ws(np); ok {
			if np2, ok = p.text(np2, ":"); ok {
				np2, _ = p.ws(np2)
				if child, np3, ok := p.term(np2); ok {
					return &propertyNode{name: name, child: child}, np3, true
				}
				if p.err != nil {
					return nil, pos, false
				}
			}
		}
		// property "?"
		if np2, ok := p.text(np, "?"); ok {
			return &truthyNode{name: name}, np2, true
		}
	}
	return p.value(pos)
}

// termsThenClose parses term+ ")".
func (p *cmParser) termsThenClose(pos int) ([]cmNode, int, bool) {
	var children []cmNode
	for {
		n, np, ok := p.term(pos)
		if p.err != nil {
			return nil, pos, false
		}
		if !ok {
			break
		}
		children = append(children, n)
		pos = np
	}
	if len(children) == 0 {
		return nil, pos, false
	}
	np, ok := p.text(pos, ")")
	if !ok {
		return nil, pos, false
	}
	return children, np, true
}

func newAnd(children []cmNode) cmNode {
	if len(children) == 1 {
		return children[0]
	}
	return &andNode{children: children}
}

func newOr(children []cmNode) cmNode {
	if len(children) == 1 {
		return children[0]
	}
	return &orNode{children: children}
}

func (p *cmParser) property(pos int) (string, int, bool) {
	if s, np, ok := p.quotedString(pos); ok {
		return s, np, true
	}
	return p.rawString(pos)
}

// quotedString mirrors XO's: an unterminated string runs to the end of the input, and a
// trailing lone backslash moves the position past the end.
func (p *cmParser) quotedString(pos int) (string, int, bool) {
	if pos >= len(p.in) || p.in[pos] != '"' {
		return "", pos, false
	}
	pos++
	var b strings.Builder
	for pos < len(p.in) {
		c := p.in[pos]
		pos++
		if c == '"' {
			break
		}
		if c == '\\' {
			if pos < len(p.in) {
				c = p.in[pos]
			} else {
				c = -1 // JavaScript reads undefined, which join() turns into "".
			}
			pos++
		}
		if c >= 0 {
			b.WriteRune(c)
		}
	}
	return b.String(), pos, true
}

func (p *cmParser) rawString(pos int) (string, int, bool) {
	start := pos
	for pos < len(p.in) && isRawStringChar(p.in[pos]) {
		pos++
	}
	if pos == start {
		return "", pos, false
	}
	return string(p.in[start:pos]), pos, true
}

func (p *cmParser) value(pos int) (cmNode, int, bool) {
	if s, np, ok := p.quotedString(pos); ok {
		return &stringNode{lc: strings.ToLower(s)}, np, true
	}
	if n, np, ok := p.regex(pos); ok {
		return n, np, true
	}
	if p.err != nil {
		return nil, pos, false
	}
	// globPattern
	start := pos
	for pos < len(p.in) && (p.in[pos] == '*' || isRawStringChar(p.in[pos])) {
		pos++
	}
	if pos == start {
		return nil, start, false
	}
	s := string(p.in[start:pos])
	if f := jsStringToNumber(s); !math.IsNaN(f) {
		return &numberOrStringNode{lc: strings.ToLower(s), num: f}, pos, true
	}
	if !strings.Contains(s, "*") {
		return &stringNode{lc: strings.ToLower(s)}, pos, true
	}
	parts := strings.Split(s, "*")
	for i, part := range parts {
		parts[i] = regexp.QuoteMeta(part)
	}
	re, err := regexp.Compile("(?i)" + strings.Join(parts, ".*"))
	if err != nil {
		p.err = &FilterError{Message: fmt.Sprintf("Invalid regular expression: %s", err)}
		return nil, start, false
	}
	return &regexNode{re: re}, pos, true
}

// regex mirrors XO's /pattern/flags reader, including its handling of escapes (a backslash
// escapes the next character only for the purpose of finding the closing slash).
func (p *cmParser) regex(pos int) (cmNode, int, bool) {
	if pos >= len(p.in) || p.in[pos] != '/' {
		return nil, pos, false
	}
	pos++
	var pattern []rune
	var c rune = -1
	escaped := false
	for pos < len(p.in) {
		c = p.in[pos]
		pos++
		if c == '/' && !escaped {
			break
		}
		escaped = c == '\\'
		pattern = append(pattern, c)
	}
	if c != '/' {
		return nil, pos, false
	}
	flags := ""
	if pos < len(p.in) && p.in[pos] == 'i' {
		pos++
		flags = "i"
	}
	re, err := compileJSRegexp(string(pattern), flags)
	if err != nil {
		p.err = &FilterError{Message: fmt.Sprintf("Invalid regular expression: /%s/%s: %s", string(pattern), flags, err)}
		return nil, pos, false
	}
	return &regexNode{re: re}, pos, true
}

// specialCased are characters that JavaScript's toUpperCase/toLowerCase change (full case
// mapping) while Go's simple mappings leave them alone; XO counts them as raw-string letters.
var specialCased = []*unicode.RangeTable{{R16: []unicode.Range16{
	{Lo: 0x00df, Hi: 0x00df, Stride: 1},
	{Lo: 0x0149, Hi: 0x0149, Stride: 1},
	{Lo: 0x01f0, Hi: 0x01f0, Stride: 1},
	{Lo: 0x0390, Hi: 0x0390, Stride: 1},
	{Lo: 0x03b0, Hi: 0x03b0, Stride: 1},
	{Lo: 0x0587, Hi: 0x0587, Stride: 1},
	{Lo: 0x1e96, Hi: 0x1e9a, Stride: 1},
	{Lo: 0x1f50, Hi: 0x1f56, Stride: 2},
	{Lo: 0x1f80, Hi: 0x1faf, Stride: 1},
	{Lo: 0x1fb2, Hi: 0x1fb4, Stride: 1},
	{Lo: 0x1fb6, Hi: 0x1fb7, Stride: 1},
	{Lo: 0x1fbc, Hi: 0x1fbc, Stride: 1},
	{Lo: 0x1fc2, Hi: 0x1fc4, Stride: 1},
	{Lo: 0x1fc6, Hi: 0x1fc7, Stride: 1},
	{Lo: 0x1fcc, Hi: 0x1fcc, Stride: 1},
	{Lo: 0x1fd2, Hi: 0x1fd3, Stride: 1},
	{Lo: 0x1fd6, Hi: 0x1fd7, Stride: 1},
	{Lo: 0x1fe2, Hi: 0x1fe4, Stride: 1},
	{Lo: 0x1fe6, Hi: 0x1fe7, Stride: 1},
	{Lo: 0x1ff2, Hi: 0x1ff4, Stride: 1},
	{Lo: 0x1ff6, Hi: 0x1ff7, Stride: 1},
	{Lo: 0x1ffc, Hi: 0x1ffc, Stride: 1},
	{Lo: 0xfb00, Hi: 0xfb06, Stride: 1},
	{Lo: 0xfb13, Hi: 0xfb17, Stride: 1},
}}}

// isRawStringChar is XO's: digits, "_", "-", ".", "$", and characters whose upper and lower
// case differ. JavaScript sees characters outside the BMP as two surrogates, which have no
// case, so those are never raw.
func isRawStringChar(r rune) bool {
	switch {
	case r >= '0' && r <= '9', r == '_', r == '-', r == '.', r == '$':
		return true
	case r < 0x80:
		return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
	case r >= 0x10000:
		return false
	}
	return unicode.ToUpper(r) != r || unicode.ToLower(r) != r || unicode.IsOneOf(specialCased, r)
}

// compileJSRegexp compiles a JavaScript regular expression (no "u" flag) with Go's regexp,
// translating the escapes whose meaning differs. Constructs RE2 lacks are reported as errors.
func compileJSRegexp(pattern, flags string) (*regexp.Regexp, error) {
	var b strings.Builder
	if flags == "i" {
		b.WriteString("(?i)")
	}
	in := []rune(pattern)
	inClass := false
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '\\':
			if i+1 >= len(in) {
				return nil, fmt.Errorf("\\ at end of pattern")
			}
			i++
			e := in[i]
			switch {
			case strings.ContainsRune("dDwWsSnrtfv", e):
				b.WriteRune('\\')
				b.WriteRune(e)
			case e == 'b' || e == 'B':
				switch {
				case inClass && e == 'b':
					b.WriteString(`\x08`)
				case inClass:
					b.WriteRune('B')
				default:
					b.WriteRune('\\')
					b.WriteRune(e)
				}
			case e == '0' && (i+1 >= len(in) || in[i+1] < '0' || in[i+1] > '9'):
				b.WriteString(`\x00`)
			case e >= '1' && e <= '9':
				if inClass {
					// Legacy octal escape inside a class.
					fmt.Fprintf(&b, `\x{%x}`, e-'0')
				} else {
					return nil, fmt.Errorf("back-references are not supported")
				}
			case e == 'x' && i+2 < len(in) && isHex(in[i+1]) && isHex(in[i+2]):
				b.WriteString(`\x` + string(in[i+1:i+3]))
				i += 2
			case e == 'u' && i+4 < len(in) && isHex(in[i+1]) && isHex(in[i+2]) && isHex(in[i+3]) && isHex(in[i+4]):
				b.WriteString(`\x{` + string(in[i+1:i+5]) + `}`)
				i += 4
			case e == 'c' && i+1 < len(in) && ((in[i+1] >= 'a' && in[i+1] <= 'z') || (in[i+1] >= 'A' && in[i+1] <= 'Z')):
				fmt.Fprintf(&b, `\x{%x}`, in[i+1]%32)
				i++
			default:
				// Identity escape: the character itself.
				b.WriteString(regexp.QuoteMeta(string(e)))
			}
		case inClass:
			if c == ']' {
				inClass = false
			}
			if c == '[' {
				b.WriteString(`\[`)
				continue
			}
			b.WriteRune(c)
		case c == '[':
			switch {
			case i+2 < len(in) && in[i+1] == '^' && in[i+2] == ']':
				b.WriteString(`[\x{0}-\x{10FFFF}]`)
				i += 2
			case i+1 < len(in) && in[i+1] == ']':
				b.WriteString(`[^\x{0}-\x{10FFFF}]`)
				i++
			default:
				inClass = true
				b.WriteRune(c)
				if i+1 < len(in) && in[i+1] == '^' {
					b.WriteRune('^')
					i++
				}
			}
		case c == '(' && i+2 < len(in) && in[i+1] == '?' && (in[i+2] == '=' || in[i+2] == '!'):
			return nil, fmt.Errorf("look-ahead assertions are not supported")
		case c == '(' && i+3 < len(in) && in[i+1] == '?' && in[i+2] == '<' && (in[i+3] == '=' || in[i+3] == '!'):
			return nil, fmt.Errorf("look-behind assertions are not supported")
		default:
			b.WriteRune(c)
		}
	}
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, err
	}
	return re, nil
}

func isHex(r rune) bool {
	return (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') || (r >= 'A' && r <= 'F')
}
