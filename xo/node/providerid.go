package node

import (
	"errors"
	"fmt"
	"strings"
)

// ProviderName is the scheme of the providerIDs this project writes: xenorchestra://<pool>/<vm>.
const ProviderName = "xenorchestra"

// legacyProviderName is a misspelled scheme found on existing nodes. It is accepted when
// reading a providerID and never written.
const legacyProviderName = "xeorchestra"

// Errors returned (wrapped in a *ProviderIDError) by ParseProviderID. Test them with errors.Is.
var (
	// ErrEmptyProviderID means the providerID is empty: the node has none yet.
	ErrEmptyProviderID = errors.New("empty providerID")
	// ErrNotOurs means the providerID belongs to another provider (e.g. aws://...). Such a node
	// must be left alone.
	ErrNotOurs = errors.New("providerID belongs to another provider")
	// ErrMalformed means the providerID has our scheme but is not <scheme>://<pool uuid>/<vm uuid>.
	ErrMalformed = errors.New("malformed providerID")
)

// maxQuoted bounds how much of a foreign string an error message repeats.
const maxQuoted = 128

// ProviderIDError describes why a providerID was not accepted. It unwraps to one of
// ErrEmptyProviderID, ErrNotOurs or ErrMalformed.
type ProviderIDError struct {
	// ProviderID is the offending value, cut to a bounded length.
	ProviderID string
	// Reason says what is wrong, in a few words.
	Reason string
	// Err is the sentinel error.
	Err error
}

// Error implements error.
func (e *ProviderIDError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("%v: %q", e.Err, e.ProviderID)
	}
	return fmt.Sprintf("%v %q: %s", e.Err, e.ProviderID, e.Reason)
}

// Unwrap returns the sentinel error.
func (e *ProviderIDError) Unwrap() error { return e.Err }

func providerIDError(s string, sentinel error, reason string) error {
	return &ProviderIDError{ProviderID: truncate(s, maxQuoted), Reason: reason, Err: sentinel}
}

// FormatProviderID returns the providerID of a VM: xenorchestra://<pool uuid>/<vm uuid>, both
// lower-cased. It never writes the legacy scheme.
func FormatProviderID(pool, vm string) string {
	return ProviderName + "://" + strings.ToLower(pool) + "/" + strings.ToLower(vm)
}

// scheme returns the part of s before the first ':' (the whole of s when there is none).
func scheme(s string) string {
	if i := strings.IndexByte(s, ':'); i >= 0 {
		return s[:i]
	}
	return s
}

// IsOurs reports whether a providerID names this provider, in the current or the legacy
// spelling of the scheme (compared case-insensitively), whether or not the rest is well-formed.
// An empty providerID is not ours.
func IsOurs(providerID string) bool {
	if providerID == "" || strings.IndexByte(providerID, ':') < 0 {
		return false
	}
	sc := scheme(providerID)
	return strings.EqualFold(sc, ProviderName) || strings.EqualFold(sc, legacyProviderName)
}

// ParseProviderID parses xenorchestra://<pool uuid>/<vm uuid> and returns both uuids
// lower-cased. The pool part may be empty (xenorchestra:///<vm uuid>), in which case pool is "".
// The legacy scheme xeorchestra:// is accepted. The vm part must be a uuid, and so must the pool
// part when present.
//
// Errors unwrap to ErrEmptyProviderID, ErrNotOurs (another provider's providerID, or a string
// with no scheme at all) or ErrMalformed (our scheme, bad rest).
func ParseProviderID(s string) (pool, vm string, err error) {
	if s == "" {
		return "", "", providerIDError(s, ErrEmptyProviderID, "")
	}
	if !IsOurs(s) {
		return "", "", providerIDError(s, ErrNotOurs, "")
	}
	rest := s[len(scheme(s))+1:]
	if !strings.HasPrefix(rest, "//") {
		return "", "", providerIDError(s, ErrMalformed, "the scheme must be followed by ://")
	}
	rest = rest[2:]
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		return "", "", providerIDError(s, ErrMalformed, "want <scheme>://<pool uuid>/<vm uuid>")
	}
	rawPool, rawVM := rest[:slash], rest[slash+1:]
	if strings.IndexByte(rawVM, '/') >= 0 {
		return "", "", providerIDError(s, ErrMalformed, "too many path segments")
	}
	if rawPool != "" {
		var ok bool
		if pool, ok = NormalizeUUID(rawPool); !ok {
			return "", "", providerIDError(s, ErrMalformed, "the pool is not a uuid")
		}
	}
	vm, ok := NormalizeUUID(rawVM)
	if !ok {
		return "", "", providerIDError(s, ErrMalformed, "the VM is not a uuid")
	}
	return pool, vm, nil
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}
