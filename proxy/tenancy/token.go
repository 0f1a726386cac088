package tenancy

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"path"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TokenKeySize is the size in bytes of the key that seals the pagination tokens tenants are
// given (WithTokenKey).
const TokenKeySize = 32

// tokenKeyInfo binds the key derived from the configured one to this use, so the same
// random bytes used elsewhere by mistake still give an unrelated key here.
const tokenKeyInfo = "csi-gateway tenancy list tokens v1"

// tokenOverhead is what sealing adds to a backend token: a random 96-bit nonce and a 128-bit
// tag (AES-256-GCM).
const tokenOverhead = 12 + 16

// MaxBackendToken is the longest backend next_token a tenant can be given: sealed and in
// base64url it is at most CSI's MaxLength (128 bytes, so 96 bytes before encoding).
const MaxBackendToken = MaxLength/4*3 - tokenOverhead

// tokens seals the backend's pagination tokens before a tenant sees them, and opens them
// when the tenant hands them back (list).
//
// The backend's token is a position in the backend's listing of every tenant's objects (the
// reference appliance's counts every volume ever made, a CSP's names the last object of the
// page, which may be another tenant's): given as is, it would tell a tenant about the others.
// Sealed with AES-GCM, it reveals nothing but its length; its additional data is the tenant
// and the method, so a token is refused when another tenant hands it in, or in another
// listing (a ListVolumes token in ListSnapshots), and a token changed by one bit is refused.
// Refused is ABORTED, CSI's answer to an invalid starting_token: the caller restarts its
// listing from the beginning.
//
// Tokens of one key are accepted by every replica that has the key, and across restarts; a
// new key refuses the old key's tokens. It is safe for concurrent use.
type tokens struct{ aead cipher.AEAD }

// newTokens returns the sealer of key (TokenKeySize bytes), or of a random key when key is nil.
func newTokens(key []byte) (*tokens, error) {
	if key == nil {
		key = make([]byte, TokenKeySize)
		rand.Read(key) // never fails (crypto/rand)
	}
	if len(key) != TokenKeySize {
		return nil, fmt.Errorf("the token key is %d bytes; want %d random bytes", len(key), TokenKeySize)
	}
	derived, err := hkdf.Key(sha256.New, key, nil, tokenKeyInfo, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(derived)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, err
	}
	return &tokens{aead: aead}, nil
}

// ParseTokenKey returns the token key in a key file's content: TokenKeySize random bytes,
// raw (head -c 32 /dev/urandom) or as hex digits (openssl rand -hex 32; white space around
// them is ignored). Hex digits of another count are refused, not taken as raw bytes: 32 hex
// digits are a 16-byte key written out, not 32 random bytes.
func ParseTokenKey(data []byte) ([]byte, error) {
	want := fmt.Sprintf("want %d random bytes, raw or as %d hex digits (openssl rand -hex %d)", TokenKeySize, 2*TokenKeySize, TokenKeySize)
	text := bytes.TrimSpace(data)
	if key, err := hex.DecodeString(string(text)); err == nil && len(text) > 0 {
		if len(key) != TokenKeySize {
			return nil, fmt.Errorf("holds %d hex digits; %s", len(text), want)
		}
		return key, nil
	}
	if len(data) != TokenKeySize {
		return nil, fmt.Errorf("holds %d bytes; %s", len(data), want)
	}
	return data, nil
}

// seal returns the token the tenant is given for the backend's next_token of a listing
// (method): base64url of nonce, ciphertext and tag. The end of a listing ("") stays "". A
// backend token longer than MaxBackendToken cannot be sealed within CSI's limit: INTERNAL,
// naming the limit.
func (t *tokens) seal(tenant, method, backendToken string) (string, error) {
	if backendToken == "" {
		return "", nil
	}
	if len(backendToken) > MaxBackendToken {
		return "", status.Errorf(codes.Internal,
			"csi-gateway: the backend's %s next_token is %d bytes; sealed for tenant %s it would be over CSI's limit of %d bytes: with tenancy a backend's tokens must stay within %d bytes",
			path.Base(method), len(backendToken), tenant, MaxLength, MaxBackendToken)
	}
	sealed := t.aead.Seal(nil, nil, []byte(backendToken), tokenAD(tenant, method))
	return base64.RawURLEncoding.EncodeToString(sealed), nil
}

// open returns the backend's token behind a token the tenant handed in for a listing
// (method); "" opens to "" (the start). A token this key did not seal for this tenant and
// method is ABORTED.
func (t *tokens) open(tenant, method, token string) (string, error) {
	if token == "" {
		return "", nil
	}
	// Strict: a token whose unused low bits were changed is refused too, not taken as the
	// same token.
	sealed, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err == nil {
		var plain []byte
		if plain, err = t.aead.Open(nil, nil, sealed, tokenAD(tenant, method)); err == nil {
			return string(plain), nil
		}
	}
	return "", status.Errorf(codes.Aborted,
		"csi-gateway: the starting_token was not issued to this caller for %s (or the gateway's token key has changed since): restart the listing with an empty starting_token",
		path.Base(method))
}

// tokenAD is a token's additional data: the tenant and the full method name, which cannot
// contain the NUL between them.
func tokenAD(tenant, method string) []byte { return []byte(tenant + "\x00" + method) }
