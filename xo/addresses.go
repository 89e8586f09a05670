package xo

import (
	"encoding/json"
	"slices"
	"strings"
)

// Address is one entry of a VM's "addresses": the guest agent's key ("<device>/<ipv4|ipv6>/<n>")
// and the IP address.
type Address struct {
	Key string
	IP  string
}

// Addresses are a VM's guest addresses in key order (CompareAddressKey). XO sends them as an
// object; a sorted slice holds them in a fifth of the memory of a map, which adds up over a
// 100,000-VM inventory, and gives them in the order the addresses are chosen in.
type Addresses []Address

// AddressesOf returns the addresses of a key → IP map, as XO sends them.
func AddressesOf(m map[string]string) Addresses {
	if len(m) == 0 {
		return nil
	}
	out := make(Addresses, 0, len(m))
	for k, ip := range m {
		out = append(out, Address{Key: k, IP: ip})
	}
	slices.SortFunc(out, func(a, b Address) int { return CompareAddressKey(a.Key, b.Key) })
	return out
}

// UnmarshalJSON decodes XO's key → IP object.
func (a *Addresses) UnmarshalJSON(data []byte) error {
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	*a = AddressesOf(m)
	return nil
}

// MarshalJSON encodes the addresses as XO does, an object.
func (a Addresses) MarshalJSON() ([]byte, error) {
	m := make(map[string]string, len(a))
	for _, e := range a {
		m[e.Key] = e.IP
	}
	return json.Marshal(m)
}

// CompareAddressKey orders XO address keys "<dev>/<ipv4|ipv6>/<n>" segment by segment,
// comparing all-digit segments as numbers, so "2/ipv4/0" comes before "10/ipv4/0".
func CompareAddressKey(a, b string) int {
	for {
		sa, ra, moreA := strings.Cut(a, "/")
		sb, rb, moreB := strings.Cut(b, "/")
		if c := compareSegment(sa, sb); c != 0 {
			return c
		}
		switch {
		case !moreA && !moreB:
			return 0
		case !moreA:
			return -1
		case !moreB:
			return 1
		}
		a, b = ra, rb
	}
}

func compareSegment(a, b string) int {
	if allDigits(a) && allDigits(b) {
		ta, tb := strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(ta) != len(tb) {
			if len(ta) < len(tb) {
				return -1
			}
			return 1
		}
		if c := strings.Compare(ta, tb); c != 0 {
			return c
		}
	}
	return strings.Compare(a, b)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
