package webhook

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// admittedNode holds the parts of a Node the defaulter reads and writes. Pointers tell a
// missing object from an empty one, because a JSON patch cannot add into a missing object.
type admittedNode struct {
	Metadata struct {
		Name        string
		Labels      map[string]string
		Annotations map[string]string
	}
	Spec   *admittedSpec
	Status *admittedStatus
}

type admittedSpec struct {
	ProviderID string
	Taints     []corev1.Taint
}

type admittedStatus struct {
	// SystemUUID is status.nodeInfo.systemUUID.
	SystemUUID string
	Addresses  []corev1.NodeAddress
}

// maxDepth is the deepest nesting accepted, encoding/json's limit.
const maxDepth = 10000

// decodeNode reads from a Node's JSON what admittedNode holds, as encoding/json would, and
// checks that the whole document is valid JSON; the other fields (status.capacity, conditions,
// images: most of the bytes) are skipped without being decoded. That costs a third of a
// json.Unmarshal into the same struct (see BenchmarkDecodeNode).
//
// It differs from encoding/json only on JSON the API server never sends: member names match
// exactly, as the API server's own decoder matches them, where encoding/json also accepts
// other cases ("Metadata"); and a repeated member replaces the earlier one where encoding/json
// merges two maps.
func decodeNode(data []byte) (admittedNode, error) {
	var n admittedNode
	d := decoder{data: data}
	err := d.object(func(key []byte) error {
		switch string(key) {
		case "metadata":
			return d.metadata(&n)
		case "spec":
			if d.null() {
				n.Spec = nil
				return nil
			}
			n.Spec = &admittedSpec{}
			return d.spec(n.Spec)
		case "status":
			if d.null() {
				n.Status = nil
				return nil
			}
			n.Status = &admittedStatus{}
			return d.status(n.Status)
		}
		return d.skip()
	})
	if err != nil {
		return admittedNode{}, err
	}
	d.space()
	if d.pos < len(d.data) {
		return admittedNode{}, d.errorf("data after the object")
	}
	return n, nil
}

func (d *decoder) metadata(n *admittedNode) error {
	m := &n.Metadata
	return d.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "name":
			m.Name, err = d.str()
		case "labels":
			m.Labels, err = d.stringMap()
		case "annotations":
			m.Annotations, err = d.stringMap()
		default:
			err = d.skip()
		}
		return err
	})
}

func (d *decoder) spec(s *admittedSpec) error {
	return d.object(func(key []byte) error {
		switch string(key) {
		case "providerID":
			var err error
			s.ProviderID, err = d.str()
			return err
		case "taints":
			var err error
			s.Taints, err = d.taints()
			return err
		}
		return d.skip()
	})
}

func (d *decoder) status(s *admittedStatus) error {
	return d.object(func(key []byte) error {
		switch string(key) {
		case "nodeInfo":
			return d.object(func(key []byte) error {
				if string(key) == "systemUUID" {
					var err error
					s.SystemUUID, err = d.str()
					return err
				}
				return d.skip()
			})
		case "addresses":
			var err error
			s.Addresses, err = d.addresses()
			return err
		}
		return d.skip()
	})
}

// decoder reads JSON from data at pos.
type decoder struct {
	data  []byte
	pos   int
	depth int
}

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", d.pos, fmt.Sprintf(format, args...))
}

// space skips white space.
func (d *decoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// consume skips white space and then c, if c is next.
func (d *decoder) consume(c byte) bool {
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

// literal skips white space and then lit, if lit is next.
func (d *decoder) literal(lit string) bool {
	d.space()
	if len(d.data)-d.pos >= len(lit) && string(d.data[d.pos:d.pos+len(lit)]) == lit {
		d.pos += len(lit)
		return true
	}
	return false
}

func (d *decoder) null() bool { return d.literal("null") }

// enter and leave count the nesting of objects and arrays.
func (d *decoder) enter() error {
	d.depth++
	if d.depth > maxDepth {
		return d.errorf("nested too deep")
	}
	return nil
}

func (d *decoder) leave() { d.depth-- }

// object reads an object (null is one without members) and calls member with each member's
// name, unescaped, and the cursor before its value, which member must read.
func (d *decoder) object(member func(key []byte) error) error {
	if d.null() {
		return nil
	}
	if !d.consume('{') {
		return d.errorf("expected an object")
	}
	if err := d.enter(); err != nil {
		return err
	}
	if d.consume('}') {
		d.leave()
		return nil
	}
	for {
		d.space()
		key, err := d.stringBytes()
		if err != nil {
			return err
		}
		if !d.consume(':') {
			return d.errorf("expected ':' after a member name")
		}
		if err := member(key); err != nil {
			return err
		}
		if d.consume(',') {
			continue
		}
		if d.consume('}') {
			d.leave()
			return nil
		}
		return d.errorf("expected ',' or '}' in an object")
	}
}

// str reads a string; null is the empty string, as encoding/json leaves a string alone.
func (d *decoder) str() (string, error) {
	if d.null() {
		return "", nil
	}
	d.space()
	b, err := d.stringBytes()
	return string(b), err
}

// stringMap reads an object of strings; null is a nil map.
func (d *decoder) stringMap() (map[string]string, error) {
	if d.null() {
		return nil, nil
	}
	m := make(map[string]string, 8)
	err := d.object(func(key []byte) error {
		v, err := d.str()
		m[string(key)] = v
		return err
	})
	return m, err
}

// taints reads a list of taints; null is a nil list.
func (d *decoder) taints() ([]corev1.Taint, error) {
	if d.null() {
		return nil, nil
	}
	out := []corev1.Taint{}
	err := d.array(func() error {
		var t corev1.Taint
		err := d.object(func(key []byte) error {
			var err error
			switch string(key) {
			case "key":
				t.Key, err = d.str()
			case "value":
				t.Value, err = d.str()
			case "effect":
				var e string
				e, err = d.str()
				t.Effect = corev1.TaintEffect(e)
			case "timeAdded":
				if d.null() {
					t.TimeAdded = nil
					return nil
				}
				d.space()
				start := d.pos
				if err := d.skip(); err != nil {
					return err
				}
				t.TimeAdded = &metav1.Time{}
				err = t.TimeAdded.UnmarshalJSON(d.data[start:d.pos])
			default:
				err = d.skip()
			}
			return err
		})
		out = append(out, t)
		return err
	})
	return out, err
}

// addresses reads a list of node addresses; null is a nil list.
func (d *decoder) addresses() ([]corev1.NodeAddress, error) {
	if d.null() {
		return nil, nil
	}
	out := make([]corev1.NodeAddress, 0, 4)
	err := d.array(func() error {
		var a corev1.NodeAddress
		err := d.object(func(key []byte) error {
			var err error
			switch string(key) {
			case "type":
				var t string
				t, err = d.str()
				a.Type = corev1.NodeAddressType(t)
			case "address":
				a.Address, err = d.str()
			default:
				err = d.skip()
			}
			return err
		})
		out = append(out, a)
		return err
	})
	return out, err
}

// stringBytes reads the string at the cursor and returns its unescaped bytes: a slice of data
// when nothing needs unescaping, else decoded by encoding/json (escapes, invalid UTF-8).
func (d *decoder) stringBytes() ([]byte, error) {
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		return nil, d.errorf("expected a string")
	}
	start := d.pos
	d.pos++
	plain := true
	for {
		if d.pos >= len(d.data) {
			return nil, d.errorf("unterminated string")
		}
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			if plain {
				return d.data[start+1 : d.pos-1], nil
			}
			var s string
			if err := json.Unmarshal(d.data[start:d.pos], &s); err != nil {
				return nil, err
			}
			return []byte(s), nil
		case c == '\\':
			plain = false
			if err := d.escape(); err != nil {
				return nil, err
			}
		case c < 0x20:
			return nil, d.errorf("control character in a string")
		case c < utf8.RuneSelf:
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				plain = false
			}
			d.pos += size
		}
	}
}

// escape checks the escape sequence at the cursor (on the backslash) and skips it.
func (d *decoder) escape() error {
	if d.pos+1 >= len(d.data) {
		return d.errorf("unterminated string")
	}
	switch d.data[d.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		d.pos += 2
		return nil
	case 'u':
		if d.pos+6 > len(d.data) {
			return d.errorf("unterminated string")
		}
		for _, h := range d.data[d.pos+2 : d.pos+6] {
			if !isHex(h) {
				return d.errorf("invalid \\u escape")
			}
		}
		d.pos += 6
		return nil
	}
	return d.errorf("invalid escape")
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skip checks and skips any value.
func (d *decoder) skip() error {
	d.space()
	if d.pos >= len(d.data) {
		return d.errorf("unexpected end")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(func([]byte) error { return d.skip() })
	case c == '[':
		return d.array(d.skip)
	case c == '"':
		_, err := d.stringBytes()
		return err
	case c == '-' || isDigit(c):
		return d.number()
	case d.literal("true"), d.literal("false"), d.literal("null"):
		return nil
	}
	return d.errorf("unexpected character %q", d.data[d.pos])
}

// array reads an array and calls elem with the cursor before each element, which elem must
// read.
func (d *decoder) array(elem func() error) error {
	if !d.consume('[') {
		return d.errorf("expected an array")
	}
	if err := d.enter(); err != nil {
		return err
	}
	if d.consume(']') {
		d.leave()
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if d.consume(',') {
			continue
		}
		if d.consume(']') {
			d.leave()
			return nil
		}
		return d.errorf("expected ',' or ']' in an array")
	}
}

// number checks and skips a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *decoder) number() error {
	p, data := d.pos, d.data
	digits := func() bool {
		start := p
		for p < len(data) && isDigit(data[p]) {
			p++
		}
		return p > start
	}
	if p < len(data) && data[p] == '-' {
		p++
	}
	switch {
	case p < len(data) && data[p] == '0':
		p++
	case !digits():
		return d.errorf("invalid number")
	}
	if p < len(data) && data[p] == '.' {
		p++
		if !digits() {
			return d.errorf("invalid number")
		}
	}
	if p < len(data) && (data[p] == 'e' || data[p] == 'E') {
		p++
		if p < len(data) && (data[p] == '+' || data[p] == '-') {
			p++
		}
		if !digits() {
			return d.errorf("invalid number")
		}
	}
	d.pos = p
	return nil
}
