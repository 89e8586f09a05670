package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// FieldError is one problem with one configuration key.
type FieldError struct {
	// Path names the key: "url", "inventory.pollPeriod", "labels.tagLabelPrefixes[1]", an
	// environment variable such as "XOA_INSECURE", or "" for the file as a whole.
	Path string
	// Message says what is wrong. It never holds the token.
	Message string
}

// Error returns "<path>: <message>".
func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// Errors is every problem found in a configuration. Load and Validate return it (Load
// wrapped with the file name); use errors.As to get the list.
type Errors []*FieldError

// Error lists every problem on one line, separated by "; ".
func (e Errors) Error() string {
	parts := make([]string, len(e))
	for i, fe := range e {
		parts[i] = fe.Error()
	}
	if len(e) == 1 {
		return "invalid configuration: " + parts[0]
	}
	return fmt.Sprintf("invalid configuration (%d problems): %s", len(e), strings.Join(parts, "; "))
}

// Unwrap returns the problems, for errors.Is and errors.As.
func (e Errors) Unwrap() []error {
	out := make([]error, len(e))
	for i, fe := range e {
		out[i] = fe
	}
	return out
}

// problems collects FieldErrors and remembers which paths already have one, so that
// validation does not report a key twice (e.g. a type error and then "required").
type problems struct {
	list Errors
	bad  map[string]bool
}

func (p *problems) add(path, format string, args ...any) {
	p.list = append(p.list, &FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	if p.bad == nil {
		p.bad = map[string]bool{}
	}
	p.bad[path] = true
}

// has reports whether path, or a key that contains it, already has a problem.
func (p *problems) has(path string) bool {
	for q := range p.bad {
		if path == q || strings.HasPrefix(path, q+".") || strings.HasPrefix(path, q+"[") {
			return true
		}
	}
	return false
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return p.list
}

// redact replaces every secret of at least minSecretLen bytes in every path and message.
// It is the last line of defence: messages are written not to hold values of secret keys,
// but a user may paste the token under the wrong key.
func (e Errors) redact(secrets []string) {
	// Longest first: of two secrets where one holds the other, the whole one goes.
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	var olds []string
	for _, s := range secrets {
		if len(s) >= minSecretLen {
			olds = append(olds, s, Redacted)
		}
	}
	if len(olds) == 0 {
		return
	}
	r := strings.NewReplacer(olds...)
	for _, fe := range e {
		fe.Path = r.Replace(fe.Path)
		fe.Message = r.Replace(fe.Message)
	}
}

// minSecretLen keeps redaction from shredding messages when a (necessarily invalid) token is
// a single character or two.
const minSecretLen = 3

// quote quotes a value from the file for a message, cut to a readable length.
func quote(s string) string {
	const maxLen = 64
	if len(s) > maxLen {
		return strconv.Quote(s[:maxLen]) + "..."
	}
	return strconv.Quote(s)
}

// sort orders the problems as the schema orders keys: the file as a whole first, then the
// top-level keys in their documented order (an environment variable where its key is),
// unknown keys after the known ones of their mapping. Equal ranks keep their order, so the
// items of a list stay in index order.
func (e Errors) sort() {
	slices.SortStableFunc(e, func(a, b *FieldError) int { return slices.Compare(rank(a.Path), rank(b.Path)) })
}

var (
	envKeys = map[string]string{EnvURL: "url", EnvToken: "token", EnvInsecure: "insecure",
		EnvUser: "username", EnvPassword: "password"}
	subKeys = map[string][]string{"inventory": inventoryKeys, "labels": labelsKeys,
		"addresses": addressesKeys, "lifecycle": lifecycleKeys}
)

func rank(path string) []int {
	if path == "" {
		return []int{-1}
	}
	if k, ok := envKeys[path]; ok {
		path = k
	}
	index := func(list []string, k string) int {
		k, _, _ = strings.Cut(k, "[")
		if i := slices.Index(list, k); i >= 0 {
			return i
		}
		return len(list)
	}
	top, rest, nested := strings.Cut(path, ".")
	r := []int{index(topKeys, top)}
	if nested {
		sub, _, _ := strings.Cut(rest, ".")
		r = append(r, index(subKeys[top], sub))
	}
	return r
}
