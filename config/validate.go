package config

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Limits of the durations.
const (
	minRequestTimeout = time.Second
	maxRequestTimeout = 5 * time.Minute
	minListTimeout    = 10 * time.Second
	maxListTimeout    = 30 * time.Minute
	// A relist of a large XO is not free: the stream keeps the inventory current between.
	minResyncPeriod = 30 * time.Second
	maxResyncPeriod = 24 * time.Hour
	minPollPeriod   = time.Second
	maxPollPeriod   = time.Hour
	maxStaleAfter   = 24 * time.Hour
)

// maxFileSize bounds every file Load reads (config, token, CA bundle).
const maxFileSize = 1 << 20

// Validate checks c and returns Errors listing every problem, or nil. It reads CAFile to
// check it holds certificates. It does not read TokenFile: Load does, into Token.
func (c *Config) Validate() error {
	var p problems
	c.validate(&p, readRegularFile)
	p.list.redact([]string{string(c.Token)})
	p.list.sort()
	return p.err()
}

// validate adds c's problems to p, skipping paths p already has.
func (c *Config) validate(p *problems, readFile func(string) ([]byte, error)) {
	check := func(path, format string, args ...any) {
		if !p.has(path) {
			p.add(path, format, args...)
		}
	}

	if _, msg := normalizeURL(c.URL); msg != "" {
		check("url", "%s", msg)
	}
	if msg := checkToken(string(c.Token)); msg != "" {
		check("token", "%s", msg)
	}

	switch {
	case c.CAFile != "" && c.CABundle != "":
		check("caBundle", "set at most one of caFile and caBundle")
	case c.CAFile != "":
		if b, err := readFile(c.CAFile); err != nil {
			check("caFile", "%v", err)
		} else if _, msg := parseCerts(b); msg != "" {
			check("caFile", "%s: %s", c.CAFile, msg)
		}
	case c.CABundle != "":
		if _, msg := parseCerts([]byte(c.CABundle)); msg != "" {
			check("caBundle", "%s", msg)
		}
	}

	checkRange(check, "requestTimeout", c.RequestTimeout, minRequestTimeout, maxRequestTimeout)
	checkRange(check, "listTimeout", c.ListTimeout, minListTimeout, maxListTimeout)
	inv := c.Inventory
	checkRange(check, "inventory.resyncPeriod", inv.ResyncPeriod, minResyncPeriod, maxResyncPeriod)
	checkRange(check, "inventory.pollPeriod", inv.PollPeriod, minPollPeriod, maxPollPeriod)
	switch {
	case inv.StaleAfter > maxStaleAfter:
		check("inventory.staleAfter", "must be at most %s", fmtDuration(maxStaleAfter))
	case inv.StaleAfter <= inv.PollPeriod && !p.has("inventory.pollPeriod"):
		// Otherwise the inventory would turn stale between two relists of a healthy XO.
		check("inventory.staleAfter", "must be greater than inventory.pollPeriod (%s)", fmtDuration(inv.PollPeriod))
	}

	for i, s := range c.Labels.TagLabelPrefixes {
		if msg := checkPrefix(s); msg != "" {
			check(fmt.Sprintf("labels.tagLabelPrefixes[%d]", i), "%s", msg)
		}
	}
	for i, s := range c.Labels.TagTaintPrefixes {
		if msg := checkPrefix(s); msg != "" {
			check(fmt.Sprintf("labels.tagTaintPrefixes[%d]", i), "%s", msg)
		}
	}
	for i, s := range c.Addresses.InternalCIDRs {
		if msg := checkCIDR(s); msg != "" {
			check(fmt.Sprintf("addresses.internalCIDRs[%d]", i), "%s", msg)
		}
	}
	for i, s := range c.Addresses.ExternalCIDRs {
		if msg := checkCIDR(s); msg != "" {
			check(fmt.Sprintf("addresses.externalCIDRs[%d]", i), "%s", msg)
		}
	}
}

func checkRange(check func(string, string, ...any), path string, d, lo, hi time.Duration) {
	switch {
	case d < lo:
		check(path, "must be at least %s", fmtDuration(lo))
	case d > hi:
		check(path, "must be at most %s", fmtDuration(hi))
	}
}

// fmtDuration writes 5m rather than 5m0s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// normalizeURL checks raw as XO's base URL and returns it with a lower-case scheme and no
// trailing slash, or a problem. The problem never quotes the URL whole: it may hold
// credentials.
func normalizeURL(raw string) (string, string) {
	if raw == "" {
		return "", "required (XO's base URL, e.g. https://xoa.example.com; or set " + EnvURL + ")"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "not a valid URL"
	}
	if u.Scheme == "" || u.Opaque != "" {
		return "", "must start with http:// or https://"
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Sprintf("scheme %s is not supported: want http or https", quote(u.Scheme))
	}
	if u.User != nil {
		return "", "must not contain credentials (user:password@): set token or tokenFile"
	}
	if u.Hostname() == "" {
		return "", "has no host"
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", fmt.Sprintf("port %s is not a port number", quote(port))
		}
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(raw, "#") {
		return "", "must not have a query (?...) or fragment (#...)"
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	for _, seg := range strings.Split(path, "/") {
		if seg == "rest" {
			return "", "must be XO's base URL, without /rest/v0 (the client adds it)"
		}
	}
	return scheme + "://" + u.Host + path, ""
}

// checkToken reports a token that is missing or that a cookie cannot carry. It never
// quotes the token.
func checkToken(tok string) string {
	if tok == "" {
		return "required: set token or tokenFile to an XO authentication token (or set " + EnvToken + ")"
	}
	if len(tok) > 4096 {
		return "is longer than 4096 bytes; is it really an XO authentication token?"
	}
	for i := 0; i < len(tok); i++ {
		// RFC 6265 cookie-octet: what net/http would otherwise silently drop.
		if c := tok[i]; c <= ' ' || c >= 0x7f || c == '"' || c == ',' || c == ';' || c == '\\' {
			return "contains a character a cookie cannot carry (space, control character, quote, comma, semicolon, backslash or non-ASCII)"
		}
	}
	return ""
}

// parseCerts parses a PEM bundle that must hold at least one certificate and nothing but
// certificates. Text outside PEM blocks (comments) is allowed.
func parseCerts(b []byte) ([]*x509.Certificate, string) {
	var certs []*x509.Certificate
	for n := 1; ; n++ {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Sprintf("PEM block %d is %s, want CERTIFICATE (a CA bundle holds certificates only)", n, quote(block.Type))
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Sprintf("PEM block %d: %v", n, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, "holds no PEM certificate"
	}
	return certs, ""
}

// checkPrefix checks a label- or taint-key prefix taken from XO tags.
func checkPrefix(s string) string {
	domain, name, ok := strings.Cut(s, "/")
	if !ok {
		// A bare prefix such as "node" would admit "node-role.kubernetes.io/..." tags.
		return fmt.Sprintf(`%s must be a DNS subdomain followed by "/" (e.g. %q), so that tags cannot reach another namespace`,
			quote(s), DefaultTagPrefix)
	}
	if domain == "kubernetes.io" || domain == "k8s.io" ||
		strings.HasSuffix(domain, ".kubernetes.io") || strings.HasSuffix(domain, ".k8s.io") {
		return fmt.Sprintf("%s is reserved: kubernetes.io and k8s.io keys belong to Kubernetes", quote(s))
	}
	if len(validation.IsDNS1123Subdomain(domain)) > 0 {
		return fmt.Sprintf(`%s: %s before "/" is not a lowercase DNS subdomain`, quote(s), quote(domain))
	}
	if name == "" {
		return ""
	}
	// The rest starts a key name: at most 62 characters so that one more fits in 63.
	if len(name) > validation.LabelValueMaxLength-1 {
		return fmt.Sprintf(`%s: the part after "/" must be at most %d characters`, quote(s), validation.LabelValueMaxLength-1)
	}
	if !isAlnum(name[0]) {
		return fmt.Sprintf(`%s: the part after "/" must start with a letter or digit`, quote(s))
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Sprintf(`%s: the part after "/" may hold only letters, digits, "-", "_" and "."`, quote(s))
		}
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// checkCIDR checks an IPv4 or IPv6 prefix in canonical form.
func checkCIDR(s string) string {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return fmt.Sprintf(`%s is not a CIDR (e.g. "10.0.0.0/8" or "fd00::/8")`, quote(s))
	}
	if m := p.Masked(); m != p {
		return fmt.Sprintf("%s has host bits set; did you mean %q?", quote(s), m.String())
	}
	return ""
}

// readRegularFile reads a regular file of at most maxFileSize bytes. Refusing devices and
// pipes keeps a typo such as /dev/zero from hanging or exhausting the process.
func readRegularFile(name string) ([]byte, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if fi.Size() > maxFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxFileSize)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxFileSize)
	}
	return b, nil
}
