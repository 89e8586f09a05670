package xosim

import (
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // name-based UUIDs (RFC 9562 version 5) are defined with SHA-1.
	"encoding/hex"
	"strings"
)

// newUUID returns a random (version 4) UUID in lower-case canonical form.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}

// nameUUID returns a name-based (version 5 style) UUID derived from the given parts, so that an
// inventory file without ids yields the same ids on every run.
func nameUUID(parts ...string) string {
	h := sha1.New() //nolint:gosec // see import comment.
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	var b [16]byte
	copy(b[:], h.Sum(nil))
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}

func formatUUID(b [16]byte) string {
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}

// parseUUID decodes a canonical UUID (any case). ok is false when s is not one.
func parseUUID(s string) (b [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return b, false
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(b[:], []byte(h)); err != nil {
		return b, false
	}
	return b, true
}

// isUUID reports whether s is a canonical UUID.
func isUUID(s string) bool {
	_, ok := parseUUID(s)
	return ok
}

// SwapUUID returns id with its first three fields byte-swapped (lower case), which is what a
// UEFI (OVMF) guest reports as its DMI system UUID, and so what kubelet puts in
// node.status.nodeInfo.systemUUID (reference §5). Applying it twice gives back the original.
// A string that is not a UUID is returned unchanged.
func SwapUUID(id string) string {
	b, ok := parseUUID(id)
	if !ok {
		return id
	}
	b[0], b[1], b[2], b[3] = b[3], b[2], b[1], b[0]
	b[4], b[5] = b[5], b[4]
	b[6], b[7] = b[7], b[6]
	return formatUUID(b)
}

// normalizeUUID lower-cases a UUID; other strings are returned unchanged.
func normalizeUUID(s string) string {
	if isUUID(s) {
		return strings.ToLower(s)
	}
	return s
}
