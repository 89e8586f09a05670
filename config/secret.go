package config

import (
	"fmt"
	"log/slog"
	"strconv"
)

// Redacted is what a non-empty Secret prints as, in every format.
const Redacted = "<redacted>"

// Secret is a string that never prints its value: String, GoString, every fmt verb,
// JSON, text and YAML marshalling, and slog all show Redacted (or "" when empty). Only
// Reveal returns the value.
type Secret string

// Reveal returns the secret value. Call it only where the value is sent to XO.
func (s Secret) Reveal() string { return string(s) }

// safe is the printable stand-in for s: Redacted, or "" when s is empty so that an unset
// secret is visibly unset.
func (s Secret) safe() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// String returns Redacted, or "" when s is empty.
func (s Secret) String() string { return s.safe() }

// GoString returns the quoted String, so %#v shows "<redacted>".
func (s Secret) GoString() string { return strconv.Quote(s.safe()) }

// Format prints the stand-in with the caller's verb and flags (%v, %+v, %#v, %s, %q, %x,
// widths, ...), so no verb reaches the value.
func (s Secret) Format(f fmt.State, verb rune) {
	// A plain string operand: no method of Secret is called again, and %#v quotes it.
	_, _ = fmt.Fprintf(f, fmt.FormatString(f, verb), s.safe())
}

// MarshalJSON encodes the stand-in as a JSON string. (json.Marshal then escapes < and >
// as \u003c and \u003e unless the encoder has SetEscapeHTML(false).)
func (s Secret) MarshalJSON() ([]byte, error) {
	// The stand-in is plain ASCII: Go and JSON quoting agree on it.
	return []byte(strconv.Quote(s.safe())), nil
}

// MarshalText returns the stand-in; it covers encoders that use encoding.TextMarshaler.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.safe()), nil }

// MarshalYAML returns the stand-in for go-yaml encoders.
func (s Secret) MarshalYAML() (any, error) { return s.safe(), nil }

// LogValue returns the stand-in for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.safe()) }
