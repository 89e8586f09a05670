package config

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// minSecretLen keeps redaction from shredding messages when a (necessarily invalid) token is
// a single character or two.
const minSecretLen = 3

// redaction hides the secrets in what Load and Validate report; every error they return passes
// through one. It is the last line of defence: messages are written not to hold secrets, but a
// user may paste the token under the wrong key. It replaces the secrets it knows (the tokens and
// passwords of the file and the environment, what unknown keys spelt like them hold, the values
// of token and password keys in a file that does not parse) as they are and as %q quotes them,
// then every word shaped like a token (hideSecretShaped).
type redaction struct{ known *strings.Replacer }

func newRedaction(secrets []string) redaction {
	// Longest first: of two secrets where one holds the other, the whole one goes.
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	var olds []string
	for _, s := range secrets {
		if len(s) >= minSecretLen {
			q := strconv.Quote(s)
			olds = append(olds, s, Redacted, q[1:len(q)-1], Redacted)
		}
	}
	return redaction{known: strings.NewReplacer(olds...)}
}

// text returns s redacted.
func (r redaction) text(s string) string { return hideSecretShaped(r.known.Replace(s)) }

// fields redacts every path, message and string value of errs.
func (r redaction) fields(errs field.ErrorList) {
	for _, e := range errs {
		e.Field, e.Detail = r.text(e.Field), r.text(e.Detail)
		if s, ok := e.BadValue.(string); ok {
			e.BadValue = r.text(s)
		}
	}
}

// tokenWord matches runs of the characters of base64 and base64url text.
var tokenWord = regexp.MustCompile(`[A-Za-z0-9_+=-]{24,}`)

// hideSecretShaped replaces with Redacted each word of s that looks like a token or password,
// for the secrets no redaction knows of: a token put under a key that is not token (region,
// topology.zone, a misspelt key's name) when the file has no token. Such a word has 24 or more
// characters of base64 or base64url with upper- and lower-case letters and digits, as XO's
// tokens do (43 characters of base64url); key paths, durations, uuids, CIDRs and DNS names have
// none, so the messages keep every value they need.
func hideSecretShaped(s string) string {
	return tokenWord.ReplaceAllStringFunc(s, func(w string) string {
		upper := strings.ContainsFunc(w, func(r rune) bool { return r >= 'A' && r <= 'Z' })
		lower := strings.ContainsFunc(w, func(r rune) bool { return r >= 'a' && r <= 'z' })
		digit := strings.ContainsFunc(w, func(r rune) bool { return r >= '0' && r <= '9' })
		if upper && lower && digit {
			return Redacted
		}
		return w
	})
}

var secretValue = regexp.MustCompile(`(?i)(?:token|password)["']?[ \t]*:[ \t]*([^\s,}#]+)`)

// scanSecrets finds the values of token and password keys in raw text, for a file that does
// not parse: the parser's message may quote them.
func scanSecrets(data []byte) []string {
	var out []string
	for _, m := range secretValue.FindAllSubmatch(data, -1) {
		// Without quotes, and without the sigil of an alias or anchor (*<token>).
		out = append(out, strings.Trim(string(m[1]), `"'*&`))
	}
	return out
}
