// Package config is the controller's configuration file: its types, Load (file and
// environment), defaults, and validation that lists every problem at once.
//
// The file format is the upstream XO cloud controller manager's single-server form (url,
// insecure, token at the top level) or a clusters list of XO servers, plus optional settings
// with safe defaults. See testdata/example.yaml for every key.
//
// The XO token is a Secret: it never appears in String or %v output, in JSON or YAML, or in
// an error returned by this package.
package config

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	"sigs.k8s.io/yaml"
)

// Environment variables read by Load, named as in the upstream XO cloud controller manager.
// They apply to the single-server form only.
const (
	EnvURL      = "XOA_URL"
	EnvToken    = "XOA_TOKEN"
	EnvInsecure = "XOA_INSECURE"
	// EnvUser and EnvPassword are recognised only to be rejected: this controller
	// authenticates with a token.
	EnvUser     = "XOA_USER"
	EnvPassword = "XOA_PASSWORD"
)

// Defaults of the optional settings.
const (
	DefaultRequestTimeout = 10 * time.Second
	// DefaultListTimeout bounds a whole listing.
	DefaultListTimeout  = 2 * time.Minute
	DefaultResyncPeriod = 10 * time.Minute
	DefaultPollPeriod   = 30 * time.Second
	DefaultStaleAfter   = 3 * time.Minute
	DefaultSettleTime   = 30 * time.Second
	// DefaultTagPrefix is the label-key prefix (and taint-key prefix) allowed from XO tags.
	DefaultTagPrefix = "tag.k8s.xenorchestra/"
)

// Values of Topology.Region and Topology.Zone.
const (
	// RegionPoolID, the default, sets topology.kubernetes.io/region to the pool uuid, as the
	// upstream XO cloud controller manager does.
	RegionPoolID = "poolID"
	// RegionPoolName uses the pool's name, sanitized.
	RegionPoolName = "poolName"
	// RegionServer uses the Region of the XO server (Cluster) the VM is on.
	RegionServer = "server"
	// ZoneHostID, the default, sets topology.kubernetes.io/zone to the host uuid.
	ZoneHostID = "hostID"
	// ZoneHostName uses the host's name, sanitized.
	ZoneHostName = "hostName"
)

// Config is the controller's configuration. Load fills it from a file and the environment,
// applies defaults and validates it; Default returns one with every default set.
//
// It marshals to JSON (and YAML through sigs.k8s.io/yaml) with durations as strings and
// tokens redacted.
type Config struct {
	// Clusters lists the XO servers. The single-server form (top-level url, token, ...) and
	// the XOA_* environment give exactly one entry; the YAML list is `clusters:` (the
	// Proxmox CCM's key).
	Clusters []Cluster `json:"clusters"`
	// Inventory tunes how the in-memory XO inventory is kept current.
	Inventory Inventory `json:"inventory"`
	// Labels says which label and taint keys XO tags may set.
	Labels Labels `json:"labels"`
	// Addresses classifies VM addresses as InternalIP or ExternalIP.
	Addresses Addresses `json:"addresses"`
	// Lifecycle holds optional node lifecycle behaviour.
	Lifecycle Lifecycle `json:"lifecycle"`
	// Topology chooses the values of the topology.kubernetes.io labels.
	Topology Topology `json:"topology"`
	// Nodes chooses the Nodes the controller leaves alone.
	Nodes Nodes `json:"nodes"`
}

// Cluster is one XO server.
type Cluster struct {
	// Name identifies the server in metrics (label server) and logs; unique. Default: the
	// URL's host[:port] (Load sets it).
	Name string `json:"name"`
	// Enabled false switches the entry off without deleting it (XO down for maintenance): the
	// controller neither connects to it nor waits for it, as for a server entry disabled in XO,
	// which does not count either. Its keys are validated all the same. Default (nil) true, see
	// IsEnabled; at least one entry is enabled. false is refused in the single-server form.
	Enabled *bool `json:"enabled,omitempty"`
	// URL is XO's base URL, http or https; a base path (XO behind a reverse proxy) is kept, a
	// trailing slash removed, the scheme and host lower-cased. The client appends /rest/v0.
	URL string `json:"url" jsonschema:"pattern=^[Hh][Tt][Tt][Pp][Ss]?://"`
	// Insecure disables verification of XO's TLS certificate, with a warning at start-up
	// (Warnings).
	Insecure bool `json:"insecure"`
	// Token is the XO authentication token: the file's token, or what the file named by
	// tokenFile holds, or XOA_TOKEN (single-server form only). Never printed.
	Token Secret `json:"token,omitempty"`
	// TokenFile is a file holding the token, read once at start-up (Load) and trimmed of
	// surrounding space; a relative path is resolved against the config file's directory.
	TokenFile string `json:"tokenFile,omitempty"`
	// CAFile is a PEM bundle of CA certificates trusted for XO in addition to the system
	// roots (resolved against the config file's directory). At most one of caFile and
	// caBundle is set. Validated even when insecure is true (then unused).
	CAFile string `json:"caFile,omitempty"`
	// CABundle is the same as CAFile, inline (PEM text).
	CABundle string `json:"caBundle,omitempty"`
	// RequestTimeout bounds each XO request. 1s to 5m; the top-level requestTimeout, itself
	// 10s by default, is the default of every entry.
	RequestTimeout time.Duration `json:"requestTimeout"`
	// ListTimeout bounds a whole streamed listing (all VMs, ...). 10s to 30m; the top-level
	// listTimeout, itself 2m by default, is the default of every entry.
	ListTimeout time.Duration `json:"listTimeout"`
	// Region is the topology.kubernetes.io/region value of this server's Nodes when
	// topology.region is "server" (RegionServer); a valid label value.
	Region string `json:"region,omitempty"`
	// Pools, when not empty, limits the server to the pools hosting Nodes: pool uuids or pool
	// names (exact, case-sensitive). A pool is in at most one server's scope.
	Pools []string `json:"pools,omitempty"`
}

// IsEnabled reports whether the controller uses the server: Enabled is nil or true.
func (c *Cluster) IsEnabled() bool { return c.Enabled == nil || *c.Enabled }

// Inventory tunes the refresh of the XO inventory.
type Inventory struct {
	// ResyncPeriod is the period of a full relist while the event stream works. Default 10m.
	ResyncPeriod time.Duration `json:"resyncPeriod"`
	// PollPeriod is the period of a full relist when XO has no event stream. Default 30s.
	PollPeriod time.Duration `json:"pollPeriod"`
	// StaleAfter is the age of the last successful refresh beyond which the inventory counts
	// as stale. Greater than PollPeriod; default 3m.
	StaleAfter time.Duration `json:"staleAfter"`
	// SettleTime: a pool that (re)connected is not trusted for absence or uniqueness until it
	// has been connected this long and seen in a full listing after that, and a VM's absence
	// must last this long before its Node may be deleted. 1s to 10m, default 30s.
	SettleTime time.Duration `json:"settleTime"`
}

// Labels lists the key prefixes XO tags may use. Each prefix is "<dns-subdomain>/" or
// "<dns-subdomain>/<start of a name>", never in a namespace VM tags may not write
// (ReservedKeyDomain): kubernetes.io, k8s.io, the computed ComputedKeyDomains, or a subdomain.
type Labels struct {
	// TagLabelPrefixes are the label-key prefixes allowed from XO tags. Default
	// ["tag.k8s.xenorchestra/"]; an empty list allows none.
	TagLabelPrefixes []string `json:"tagLabelPrefixes"`
	// TagTaintPrefixes are the taint-key prefixes allowed from XO tags. Default
	// ["tag.k8s.xenorchestra/"]; an empty list allows none.
	TagTaintPrefixes []string `json:"tagTaintPrefixes"`
}

// Addresses holds the CIDR rules that classify a VM's addresses. Each entry is an IPv4 or
// IPv6 prefix in canonical form (no host bits set).
type Addresses struct {
	// InternalCIDRs are the ranges whose addresses are published as InternalIP.
	InternalCIDRs []string `json:"internalCIDRs"`
	// ExternalCIDRs are the ranges whose addresses are published as ExternalIP.
	ExternalCIDRs []string `json:"externalCIDRs"`
}

// Lifecycle holds optional node lifecycle behaviour.
type Lifecycle struct {
	// OutOfServiceTaint applies node.kubernetes.io/out-of-service:NoExecute to a NotReady
	// node whose VM is halted. Default false.
	OutOfServiceTaint bool `json:"outOfServiceTaint"`
}

// Topology chooses the topology.kubernetes.io label values.
type Topology struct {
	// Region is what topology.kubernetes.io/region holds: the pool's uuid (RegionPoolID, the
	// default), its name (RegionPoolName) or the XO server's region (RegionServer).
	Region string `json:"region"`
	// Zone is what topology.kubernetes.io/zone holds: the host's uuid (ZoneHostID, the default)
	// or its name (ZoneHostName).
	Zone string `json:"zone"`
}

// Nodes chooses the Nodes the controller leaves alone.
type Nodes struct {
	// IgnoreSelector is a Kubernetes label selector (labels.Parse syntax); Nodes matching it
	// are left alone entirely. Nodes labelled node.k8s.xenorchestra/ignore=true are always
	// left alone. Empty: none besides those.
	IgnoreSelector string `json:"ignoreSelector"`
}

// Default returns a Config with every optional setting at its default and no cluster:
// Validate reports clusters missing.
func Default() *Config {
	return &Config{
		Inventory: Inventory{
			ResyncPeriod: DefaultResyncPeriod,
			PollPeriod:   DefaultPollPeriod,
			StaleAfter:   DefaultStaleAfter,
			SettleTime:   DefaultSettleTime,
		},
		Labels: Labels{
			TagLabelPrefixes: []string{DefaultTagPrefix},
			TagTaintPrefixes: []string{DefaultTagPrefix},
		},
		Addresses: Addresses{InternalCIDRs: []string{}, ExternalCIDRs: []string{}},
		Topology:  Topology{Region: RegionPoolID, Zone: ZoneHostID},
	}
}

// Effective returns c as YAML with durations as strings and tokens redacted, for display
// (it does not load back: a redacted token is no token).
func (c *Config) Effective() ([]byte, error) {
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return b, nil
}

// MarshalJSON writes RequestTimeout and ListTimeout as duration strings; the token is
// redacted by Secret.
func (c Cluster) MarshalJSON() ([]byte, error) {
	// plain has Cluster's fields but not this method; the outer fields shadow their namesakes.
	type plain Cluster
	return json.Marshal(struct {
		plain
		RequestTimeout string `json:"requestTimeout"`
		ListTimeout    string `json:"listTimeout"`
	}{plain(c), c.RequestTimeout.String(), c.ListTimeout.String()})
}

// MarshalJSON writes the periods as duration strings.
func (i Inventory) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ResyncPeriod string `json:"resyncPeriod"`
		PollPeriod   string `json:"pollPeriod"`
		StaleAfter   string `json:"staleAfter"`
		SettleTime   string `json:"settleTime"`
	}{i.ResyncPeriod.String(), i.PollPeriod.String(), i.StaleAfter.String(), i.SettleTime.String()})
}

// InternalPrefixes returns InternalCIDRs parsed; entries that do not parse are skipped
// (Validate reports them).
func (a Addresses) InternalPrefixes() []netip.Prefix { return parsePrefixes(a.InternalCIDRs) }

// ExternalPrefixes returns ExternalCIDRs parsed; entries that do not parse are skipped
// (Validate reports them).
func (a Addresses) ExternalPrefixes() []netip.Prefix { return parsePrefixes(a.ExternalCIDRs) }

func parsePrefixes(cidrs []string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, s := range cidrs {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}
