package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
)

// TLSConfig returns the TLS settings for the XO server c: TLS 1.2 or newer, the system roots
// plus the certificates of CAFile or CABundle, and no verification only when Insecure is set.
// It reads CAFile again, so a rotated bundle is picked up by the next call.
func (c *Cluster) TLSConfig() (*tls.Config, error) {
	t := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Opt-in only, and Warnings tells the operator loudly.
		InsecureSkipVerify: c.Insecure, //nolint:gosec // explicit user choice, warned about
	}
	var (
		bundle []byte
		source = "caBundle"
	)
	switch {
	case c.CAFile != "" && c.CABundle != "":
		return nil, errors.New("config: set at most one of caFile and caBundle")
	case c.CAFile != "":
		b, err := readRegularFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("config: caFile: %w", err)
		}
		bundle, source = b, "caFile"
	case c.CABundle != "":
		bundle = []byte(c.CABundle)
	default:
		return t, nil
	}
	certs, msg := parseCerts(bundle)
	if msg != "" {
		return nil, fmt.Errorf("config: %s: %s", source, msg)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		// No system roots (e.g. a scratch image without CA certificates): the bundle alone.
		pool = x509.NewCertPool()
	}
	for _, cert := range certs {
		pool.AddCert(cert)
	}
	t.RootCAs = pool
	return t, nil
}

// Warnings returns what the operator should be told loudly about c, each naming the XO
// server: disabled certificate verification, a token sent in clear text, settings that have
// no effect.
func (c *Config) Warnings() []string {
	var w []string
	for _, cl := range c.Clusters {
		server := "XO server " + cl.Name + ": "
		if !cl.IsEnabled() {
			w = append(w, server+"enabled is false: not connected and not waited for; Nodes it alone holds the VM of keep what they have and are "+
				"never deleted for it, and new ones stay uninitialized until it is enabled again")
			continue
		}
		if cl.Insecure {
			w = append(w, server+"insecure is true: XO's TLS certificate is not verified, so anyone on the network path "+
				"can impersonate XO and capture the token; trust XO's CA with caFile or caBundle instead")
			if cl.CAFile != "" || cl.CABundle != "" {
				w = append(w, server+"caFile/caBundle is checked but not used while insecure is true")
			}
		}
		if strings.HasPrefix(strings.ToLower(cl.URL), "http://") {
			w = append(w, server+"url uses http: the XO token travels unencrypted; use https")
		}
		if cl.Region != "" && c.Topology.Region != RegionServer {
			w = append(w, server+`region has no effect unless topology.region is "server"`)
		}
	}
	return w
}
