package node

// uuidLen is the length of a uuid in its canonical 8-4-4-4-12 text form.
const uuidLen = 36

// Flags of uuidClass.
const (
	classHex   = 1 << iota // a hex digit
	classUpper             // an upper-case hex digit
)

// uuidClass classifies each byte for isUUID without branches.
var uuidClass = func() (t [256]uint8) {
	for c := '0'; c <= '9'; c++ {
		t[c] = classHex
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = classHex
		t[c-'a'+'A'] = classHex | classUpper
	}
	return t
}()

// hexPositions are the offsets of the 32 hex digits in the 8-4-4-4-12 form.
var hexPositions = [32]uint8{
	0, 1, 2, 3, 4, 5, 6, 7,
	9, 10, 11, 12,
	14, 15, 16, 17,
	19, 20, 21, 22,
	24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,
}

// isUUID reports whether s is a uuid in 8-4-4-4-12 hex form (either case), and whether it has
// upper-case hex digits.
func isUUID(s string) (ok, upper bool) {
	if len(s) != uuidLen || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false, false
	}
	all, some := uint8(classHex), uint8(0)
	for _, p := range hexPositions {
		c := uuidClass[s[p]]
		all &= c
		some |= c
	}
	return all&classHex != 0, some&classUpper != 0
}

// NormalizeUUID validates a uuid in 8-4-4-4-12 hex form and returns it lower-cased. It does not
// allocate when s is already lower-case.
func NormalizeUUID(s string) (string, bool) {
	ok, upper := isUUID(s)
	if !ok {
		return "", false
	}
	if !upper {
		return s, true
	}
	var b [uuidLen]byte
	for i := 0; i < uuidLen; i++ {
		c := s[i]
		if c >= 'A' && c <= 'F' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return string(b[:]), true
}

// swapOrder gives, for each output position of the swapped uuid, the input position it is read
// from: the first three fields have their bytes (hex digit pairs) reversed, the rest is kept.
var swapOrder = [uuidLen]uint8{
	6, 7, 4, 5, 2, 3, 0, 1, // field 1: 4 bytes reversed
	8,
	11, 12, 9, 10, // field 2: 2 bytes reversed
	13,
	16, 17, 14, 15, // field 3: 2 bytes reversed
	18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,
}

// SwapUUID returns s with the bytes of its first three fields reversed, lower-cased: the form in
// which a UEFI (SMBIOS >= 2.6) guest reports the XAPI VM uuid as its system uuid, and back
// (the swap is its own inverse). It returns false when s is not a uuid in 8-4-4-4-12 hex form.
func SwapUUID(s string) (string, bool) {
	if ok, _ := isUUID(s); !ok {
		return "", false
	}
	var b [uuidLen]byte
	for i, from := range swapOrder {
		c := s[from]
		if c >= 'A' && c <= 'F' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return string(b[:]), true
}
