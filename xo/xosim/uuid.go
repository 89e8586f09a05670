package xosim

import (
	"strings"

	"github.com/google/uuid"

	"github.com/xenorchestra-k8s/xenorchestra-cloud-controller-manager/xo/node"
)

// nameSpace is the namespace of the simulator's name-based UUIDs.
var nameSpace = uuid.MustParse("5d1b7a0e-2c4f-4e8a-9b3d-6f0c1e2a7b94")

// newUUID returns a random (version 4) UUID in lower-case canonical form.
func newUUID() string { return uuid.NewString() }

// nameUUID returns a name-based (version 5) UUID derived from the given parts, so that an
// inventory file without ids yields the same ids on every run.
func nameUUID(parts ...string) string {
	return uuid.NewSHA1(nameSpace, []byte(strings.Join(parts, "\x00"))).String()
}

// isUUID reports whether s is a UUID in canonical 8-4-4-4-12 form, either case (uuid.Parse
// also takes the urn: and braced forms, which XO never gives).
func isUUID(s string) bool {
	_, ok := node.NormalizeUUID(s)
	return ok
}

// SwapUUID returns id with its first three fields byte-swapped (lower case), which is what a
// UEFI (OVMF) guest reports as its DMI system UUID, and so what kubelet puts in
// node.status.nodeInfo.systemUUID (reference §5): node.SwapUUID, which the controller matches
// with. Applying it twice gives back the original. A string that is not a UUID is returned
// unchanged.
func SwapUUID(id string) string {
	if s, ok := node.SwapUUID(id); ok {
		return s
	}
	return id
}

// normalizeUUID lower-cases a UUID; other strings are returned unchanged.
func normalizeUUID(s string) string {
	if n, ok := node.NormalizeUUID(s); ok {
		return n
	}
	return s
}
