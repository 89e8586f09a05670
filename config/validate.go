package config

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
	minSettleTime   = time.Second
	maxSettleTime   = 10 * time.Minute
)

// maxFileSize bounds every file Load reads (config, token, CA bundle).
const maxFileSize = 1 << 20

var (
	topologyRegions = []string{RegionPoolID, RegionPoolName, RegionServer}
	topologyZones   = []string{ZoneHostID, ZoneHostName}
)

// TopologyRegions returns the values Topology.Region accepts.
func TopologyRegions() []string { return slices.Clone(topologyRegions) }

// TopologyZones returns the values Topology.Zone accepts.
func TopologyZones() []string { return slices.Clone(topologyZones) }

// Validate checks c and returns every problem, a utilerrors.Aggregate of *field.Error, or
// nil. It reads each CAFile to check it holds certificates. It does not read TokenFile: Load
// does, into Token.
func (c *Config) Validate() error {
	errs := c.validate(readRegularFile)
	var secrets []string
	for _, cl := range c.Clusters {
		secrets = append(secrets, string(cl.Token))
	}
	newRedaction(secrets).fields(errs)
	return errs.ToAggregate()
}

func (c *Config) validate(readFile func(string) ([]byte, error)) field.ErrorList {
	var errs field.ErrorList
	cp := field.NewPath("clusters")
	if len(c.Clusters) == 0 {
		errs = append(errs, field.Required(cp, "list at least one XO server"))
	} else if !slices.ContainsFunc(c.Clusters, func(cl Cluster) bool { return cl.IsEnabled() }) {
		p, detail := cp, "every entry has enabled: false: enable at least one (to stop the controller, scale it to 0)"
		if len(c.Clusters) == 1 {
			p, detail = cp.Index(0).Child("enabled"), "false switches off the only XO server, and the controller would do nothing: to stop it, scale it to 0"
		}
		errs = append(errs, field.Invalid(p, false, detail))
	}
	// Each maps a value that must be unique to the path that has it first.
	names, urls, pools := map[string]*field.Path{}, map[string]*field.Path{}, map[string]*field.Path{}
	unique := func(seen map[string]*field.Path, key string, p *field.Path, value any, detail string) bool {
		first, dup := seen[key]
		if !dup {
			seen[key] = p
			return false
		}
		e := field.Duplicate(p, value)
		e.Detail = "also at " + first.String() + detail
		errs = append(errs, e)
		return true
	}
	for i := range c.Clusters {
		cl, p := &c.Clusters[i], cp.Index(i)
		errs = append(errs, cl.validate(p, readFile)...)
		dupURL := false
		if u, msg := normalizeURL(cl.URL); msg == "" {
			dupURL = unique(urls, u, p.Child("url"), u, "")
		}
		if name := cl.name(); name != "" && (cl.Name != "" || !dupURL) {
			unique(names, name, p.Child("name"), name, "; a name defaults to the URL's host[:port]")
		}
		for j, pool := range cl.Pools {
			key := pool
			if uuid.Validate(pool) == nil {
				key = strings.ToLower(pool)
			}
			unique(pools, key, p.Child("pools").Index(j), pool, ": a pool is in one server's scope at most")
		}
		if c.Topology.Region == RegionServer && cl.Region == "" {
			errs = append(errs, field.Required(p.Child("region"), `required when topology.region is "server"`))
		}
	}

	ip := field.NewPath("inventory")
	inv := c.Inventory
	errs = append(errs, checkRange(ip.Child("resyncPeriod"), inv.ResyncPeriod, minResyncPeriod, maxResyncPeriod)...)
	errs = append(errs, checkRange(ip.Child("pollPeriod"), inv.PollPeriod, minPollPeriod, maxPollPeriod)...)
	// Not above pollPeriod, the inventory would turn stale between two relists of a healthy XO.
	if inv.StaleAfter <= inv.PollPeriod || inv.StaleAfter > maxStaleAfter {
		errs = append(errs, field.Invalid(ip.Child("staleAfter"), fmtDuration(inv.StaleAfter),
			fmt.Sprintf("must be greater than inventory.pollPeriod (%s) and at most %s", fmtDuration(inv.PollPeriod), fmtDuration(maxStaleAfter))))
	}
	errs = append(errs, checkRange(ip.Child("settleTime"), inv.SettleTime, minSettleTime, maxSettleTime)...)

	lp, ap := field.NewPath("labels"), field.NewPath("addresses")
	errs = append(errs, checkEach(lp.Child("tagLabelPrefixes"), c.Labels.TagLabelPrefixes, checkPrefix)...)
	errs = append(errs, checkEach(lp.Child("tagTaintPrefixes"), c.Labels.TagTaintPrefixes, checkPrefix)...)
	errs = append(errs, checkEach(ap.Child("internalCIDRs"), c.Addresses.InternalCIDRs, checkCIDR)...)
	errs = append(errs, checkEach(ap.Child("externalCIDRs"), c.Addresses.ExternalCIDRs, checkCIDR)...)

	tp := field.NewPath("topology")
	if !slices.Contains(topologyRegions, c.Topology.Region) {
		errs = append(errs, field.NotSupported(tp.Child("region"), c.Topology.Region, topologyRegions))
	}
	if !slices.Contains(topologyZones, c.Topology.Zone) {
		errs = append(errs, field.NotSupported(tp.Child("zone"), c.Topology.Zone, topologyZones))
	}
	if s := c.Nodes.IgnoreSelector; s != "" {
		if _, err := labels.Parse(s); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("nodes", "ignoreSelector"), s, err.Error()))
		}
	}
	return errs
}

// validate returns c's own problems, under p.
func (c *Cluster) validate(p *field.Path, readFile func(string) ([]byte, error)) field.ErrorList {
	var errs field.ErrorList
	if c.URL == "" {
		errs = append(errs, field.Required(p.Child("url"), "XO's base URL, e.g. https://xoa.example.com"))
	} else if _, msg := normalizeURL(c.URL); msg != "" {
		// Not echoed: a URL may hold credentials.
		errs = append(errs, field.Invalid(p.Child("url"), field.OmitValueType{}, msg))
	}
	if c.Token == "" {
		errs = append(errs, field.Required(p.Child("token"), "an XO authentication token: set token or tokenFile"))
	} else if msg := checkToken(string(c.Token)); msg != "" {
		errs = append(errs, field.Invalid(p.Child("token"), field.OmitValueType{}, msg))
	}
	switch {
	case c.CAFile != "" && c.CABundle != "":
		errs = append(errs, field.Forbidden(p.Child("caBundle"), "set at most one of caFile and caBundle"))
	case c.CAFile != "":
		if b, err := readFile(c.CAFile); err != nil {
			errs = append(errs, field.Invalid(p.Child("caFile"), field.OmitValueType{}, unreadable(err, "a PEM bundle of CA certificates")))
		} else if _, msg := parseCerts(b); msg != "" {
			errs = append(errs, field.Invalid(p.Child("caFile"), field.OmitValueType{}, "the file "+msg))
		}
	case c.CABundle != "":
		if _, msg := parseCerts([]byte(c.CABundle)); msg != "" {
			errs = append(errs, field.Invalid(p.Child("caBundle"), field.OmitValueType{}, msg))
		}
	}
	errs = append(errs, checkRange(p.Child("requestTimeout"), c.RequestTimeout, minRequestTimeout, maxRequestTimeout)...)
	errs = append(errs, checkRange(p.Child("listTimeout"), c.ListTimeout, minListTimeout, maxListTimeout)...)
	if msgs := validation.IsValidLabelValue(c.Region); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("region"), c.Region, strings.Join(msgs, "; ")))
	}
	for j, pool := range c.Pools {
		if pool == "" {
			errs = append(errs, field.Required(p.Child("pools").Index(j), "a pool uuid or name"))
		}
	}
	return errs
}

// unreadable is the problem of a path-like key whose file cannot be read: the cause, and what
// the key expects. It never quotes the path: a token put under the key by mistake would show.
func unreadable(err error, holding string) string {
	return fmt.Sprintf("cannot read the file: %v; want the path of a file holding %s (the value is not shown, in case it is a secret put under the wrong key)", err, holding)
}

// name returns Name, or the URL's host[:port] when Name is empty, or "" when the URL is
// not valid either.
func (c *Cluster) name() string {
	if c.Name != "" {
		return c.Name
	}
	if norm, msg := normalizeURL(c.URL); msg == "" {
		if u, err := url.Parse(norm); err == nil {
			return u.Host
		}
	}
	return ""
}

// checkRange reports d at p unless it is in [lo, hi].
func checkRange(p *field.Path, d, lo, hi time.Duration) field.ErrorList {
	if d < lo || d > hi {
		return field.ErrorList{field.Invalid(p, fmtDuration(d), fmt.Sprintf("must be between %s and %s", fmtDuration(lo), fmtDuration(hi)))}
	}
	return nil
}

// checkEach reports each item of list that check finds a problem with, at p[index].
func checkEach(p *field.Path, list []string, check func(string) string) field.ErrorList {
	var errs field.ErrorList
	for i, s := range list {
		if msg := check(s); msg != "" {
			errs = append(errs, field.Invalid(p.Index(i), s, msg))
		}
	}
	return errs
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

// normalizeURL checks raw as XO's base URL and returns it with a lower-case scheme and host
// and no trailing slash, or a problem. The problem never quotes the URL whole: it may hold
// credentials.
func normalizeURL(raw string) (string, string) {
	// url.Parse keeps a space in the path, as %20: "https://xo.example.com/ " (quoted in YAML)
	// would reach XO as /%20/rest/v0. XOA_URL is trimmed before it gets here.
	if strings.ContainsFunc(raw, unicode.IsSpace) {
		return "", "must not contain whitespace (a space or newline at either end is easy to miss; write a space in the path as %20)"
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
		return "", fmt.Sprintf("scheme %q is not supported: want http or https", u.Scheme)
	}
	if u.User != nil {
		return "", "must not contain credentials (user:password@): set token or tokenFile"
	}
	if u.Hostname() == "" {
		return "", "has no host"
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", fmt.Sprintf("port %q is not a port number", port)
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
	return scheme + "://" + strings.ToLower(u.Host) + path, ""
}

// checkToken reports a token that a cookie cannot carry. It never quotes the token.
func checkToken(tok string) string {
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
			return nil, fmt.Sprintf("PEM block %d is %q, want CERTIFICATE (a CA bundle holds certificates only)", n, block.Type)
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

// checkPrefix checks a label- or taint-key prefix taken from XO tags. Its message does not
// quote s (the error's value does).
func checkPrefix(s string) string {
	domain, name, ok := strings.Cut(s, "/")
	if !ok {
		// A bare prefix such as "node" would admit "node-role.kubernetes.io/..." tags.
		return fmt.Sprintf(`must be a DNS subdomain followed by "/" (e.g. %q), so that tags cannot reach another namespace`, DefaultTagPrefix)
	}
	// Refused as a whole: xo/node refuses every tag key in these namespaces.
	switch d := ReservedKeyDomain(domain); {
	case slices.Contains(kubernetesKeyDomains, d):
		return "reserved: kubernetes.io and k8s.io keys belong to Kubernetes"
	case d != "":
		return fmt.Sprintf("reserved: the controller computes the keys under %s/ itself, from XO data; tags may not set them", d)
	}
	if len(validation.IsDNS1123Subdomain(domain)) > 0 {
		return `the part before "/" must be a lowercase DNS subdomain`
	}
	if name == "" {
		return ""
	}
	// The rest starts a key name: at most 62 characters so that one more fits in 63.
	if len(name) > validation.LabelValueMaxLength-1 {
		return fmt.Sprintf(`the part after "/" must be at most %d characters`, validation.LabelValueMaxLength-1)
	}
	if !isAlnum(name[0]) {
		return `the part after "/" must start with a letter or digit`
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return `the part after "/" may hold only letters, digits, "-", "_" and "."`
		}
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// checkCIDR checks an IPv4 or IPv6 prefix in canonical form. Its message does not quote s.
func checkCIDR(s string) string {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return `not a CIDR (e.g. "10.0.0.0/8" or "fd00::/8")`
	}
	if m := p.Masked(); m != p {
		return fmt.Sprintf("has host bits set; did you mean %q?", m.String())
	}
	return ""
}

// readRegularFile reads a regular file of at most maxFileSize bytes. Refusing devices and
// pipes keeps a typo such as /dev/zero from hanging or exhausting the process. Its errors never
// hold name: a path-like key (tokenFile, caFile) may hold a token put there by mistake, and the
// callers that know name is a path (--config) add it themselves.
func readRegularFile(name string) ([]byte, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, pathless(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if fi.Size() > maxFileSize {
		return nil, errTooLarge
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, pathless(err)
	}
	if len(b) > maxFileSize {
		return nil, errTooLarge
	}
	return b, nil
}

var errTooLarge = fmt.Errorf("larger than %d bytes (1 MiB), the limit of the config, token and CA files", maxFileSize)

// pathless returns err without the path an *fs.PathError carries (errors.Is still sees the
// cause, such as fs.ErrNotExist).
func pathless(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}
