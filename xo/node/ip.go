package node

import (
	"net/netip"
	"strings"
)

// matchableIP returns the canonical form of an address worth matching on: not loopback,
// link-local, multicast or unspecified (those are shared by every machine).
func matchableIP(s string) (string, bool) {
	a, canon, ok := canonicalIP(s)
	if !ok || !usableAddr(a) {
		return "", false
	}
	return canon, true
}

// usableAddr reports whether an address identifies a machine: not loopback, link-local,
// multicast or unspecified.
func usableAddr(a netip.Addr) bool {
	return !a.IsLoopback() && !a.IsLinkLocalUnicast() && !a.IsLinkLocalMulticast() &&
		!a.IsMulticast() && !a.IsUnspecified() && !a.IsInterfaceLocalMulticast()
}

// canonicalIP parses an IPv4 or IPv6 address (surrounding spaces allowed, no zone) and returns
// it with its canonical text, the same as net.ParseIP(s).String(): IPv4-mapped IPv6 addresses
// are written as IPv4. It does not allocate when s is already canonical.
func canonicalIP(s string) (netip.Addr, string, bool) {
	s = strings.TrimSpace(s)
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, "", false
	}
	a = a.Unmap()
	var buf [64]byte
	out := a.AppendTo(buf[:0])
	if string(out) == s {
		return a, s, true
	}
	return a, string(out), true
}
