package tenancy

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Separator joins a tenant's name to the names and IDs it scopes. Tenant names cannot
// contain it, which makes the encoding unambiguous.
const Separator = "."

// MaxLength is CSI's limit on names and IDs, in bytes.
const MaxLength = 128

// tenantName is what a tenant may be called: short, lower case, DNS-label-like, no
// Separator.
var tenantName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// ValidTenantName returns an error saying why name cannot name a tenant.
func ValidTenantName(name string) error {
	if !tenantName.MatchString(name) {
		return fmt.Errorf("tenant name %q: use 1 to 32 lower-case letters, digits and '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// prefix is what the tenant's names and IDs start with.
func prefix(tenant string) string { return tenant + Separator }

// ScopeName returns the backend's name for an object the tenant names name: "TENANT.NAME"
// when that fits CSI's MaxLength. A longer name (CSI allows the tenant all 128 bytes) keeps as
// much of its beginning as fits and ends in "-" and a hash of the whole name, so it is still
// stable, still readable, and still distinct from every other name (names are never read
// back from the backend, so they need not be reversible; the ledger keeps the pairing). A name
// over MaxLength itself is INVALID_ARGUMENT.
func ScopeName(tenant, name string) (string, error) {
	if len(name) > MaxLength {
		return "", status.Errorf(codes.InvalidArgument, "csi-gateway: name is %d bytes, over CSI's limit of %d", len(name), MaxLength)
	}
	scoped := prefix(tenant) + name
	if len(scoped) <= MaxLength {
		return scoped, nil
	}
	sum := sha256.Sum256([]byte(name))
	hash := "-" + nameHash.EncodeToString(sum[:])[:nameHashLen]
	keep := MaxLength - len(prefix(tenant)) - len(hash)
	for keep > 0 && !utf8.RuneStart(name[keep]) {
		keep-- // never cut a character in two: names must stay valid UTF-8
	}
	return prefix(tenant) + name[:keep] + hash, nil
}

// cutAndHashed reports whether a backend name may be one ScopeName cut and hashed: MaxLength
// bytes ending in "-" and nameHashLen characters of nameHash's alphabet. (A name a tenant
// gave may look the same.)
func cutAndHashed(scoped string) bool {
	if len(scoped) != MaxLength || scoped[MaxLength-nameHashLen-1] != '-' {
		return false
	}
	return strings.Trim(scoped[MaxLength-nameHashLen:], nameHashAlphabet) == ""
}

// nameHash spells the hash of a long name in lower-case letters and digits, which every
// backend accepts in names; nameHashLen characters carry 130 bits.
var nameHash = base32.NewEncoding(nameHashAlphabet).WithPadding(base32.NoPadding)

const nameHashAlphabet = "0123456789abcdefghijklmnopqrstuv"

const nameHashLen = 26

// ScopeID returns the ID the tenant sees for a backend ID, or INTERNAL when the backend's ID
// leaves no room for the tenant's prefix.
func ScopeID(tenant, backendID string) (string, error) {
	scoped := prefix(tenant) + backendID
	if len(scoped) > MaxLength {
		return "", status.Errorf(codes.Internal,
			"csi-gateway: the backend's ID is %d bytes; with the prefix of tenant %s it would be %d bytes, over CSI's limit of %d: the backend's IDs must stay within %d bytes, or the tenant's name be shorter",
			len(backendID), tenant, len(scoped), MaxLength, MaxLength-len(prefix(tenant)))
	}
	return scoped, nil
}

// UnscopeID returns the backend ID behind an ID the tenant sent, and false when the ID is
// not one of the tenant's (it lacks the tenant's prefix).
func UnscopeID(tenant, id string) (string, bool) {
	backendID, ok := strings.CutPrefix(id, prefix(tenant))
	return backendID, ok && backendID != ""
}
