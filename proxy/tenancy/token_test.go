package tenancy

import (
	"bytes"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
)

func TestParseTokenKey(t *testing.T) {
	raw := bytes.Repeat([]byte{0xa5}, TokenKeySize)
	hexKey := strings.Repeat("a5", TokenKeySize)
	for _, tc := range []struct {
		name, data string
		want       []byte // nil: an error
	}{
		{"hex", hexKey, raw},
		{"hex with a newline", hexKey + "\n", raw},
		{"upper-case hex", strings.ToUpper(hexKey), raw},
		{"raw bytes", string(raw), raw},
		{"raw bytes that look like white space", strings.Repeat("\n", TokenKeySize), bytes.Repeat([]byte("\n"), TokenKeySize)},
		{"short hex", hexKey[:62], nil},
		{"32 hex digits (a 16-byte key)", hexKey[:32], nil},
		{"odd hex", hexKey[:63], nil},
		{"short raw", string(raw[:31]), nil},
		{"long raw", string(raw) + "x", nil},
		{"hex that is not hex", strings.Repeat("zz", TokenKeySize), nil},
		{"empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, err := ParseTokenKey([]byte(tc.data))
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), "; want 32 random bytes, raw or as 64 hex digits") {
					t.Fatalf("key %x, error %v; want an error saying what a key is", key, err)
				}
				return
			}
			if err != nil || !bytes.Equal(key, tc.want) {
				t.Fatalf("key %x, %v; want %x", key, err, tc.want)
			}
		})
	}
}

func TestOpenRefusesATokenKeyOfTheWrongSize(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "tenancy.db"), nil, WithTokenKey(make([]byte, 16)))
	if err == nil || !strings.Contains(err.Error(), "the token key is 16 bytes; want 32") {
		t.Fatalf("Open with a 16-byte key: %v", err)
	}
}

func mustTokens(t *testing.T, key []byte) *tokens {
	t.Helper()
	tk, err := newTokens(key)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestTokensSealed: a sealed token opens for the tenant and listing it was sealed for, with
// the same key only; it never shows the backend's token; a token another tenant hands in, a
// token of another listing, and a token changed anywhere are ABORTED.
func TestTokensSealed(t *testing.T) {
	key := bytes.Repeat([]byte{7}, TokenKeySize)
	tk := mustTokens(t, key)
	const backendToken = "dm9sdW1lczo0MjA" // the reference appliance's "volumes:420"; sealed, 43 bytes: the last character has unused bits
	sealed, err := tk.seal("blue", listVolumes, backendToken)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil {
		t.Fatalf("the token %q is not base64url: %v", sealed, err)
	}
	if strings.Contains(sealed, backendToken) || bytes.Contains(raw, []byte(backendToken)) || bytes.Contains(raw, []byte("volumes:")) {
		t.Errorf("the sealed token %q shows the backend's", sealed)
	}
	if again, _ := tk.seal("blue", listVolumes, backendToken); again == sealed {
		t.Errorf("sealing twice gave the same token %q: the nonce is not random", sealed)
	}
	for _, tc := range []struct {
		name        string
		tk          *tokens
		tenant, via string
	}{
		{"the same key", tk, "blue", listVolumes},
		{"the same key in another process (a replica, a restart)", mustTokens(t, key), "blue", listVolumes},
	} {
		if got, err := tc.tk.open(tc.tenant, tc.via, sealed); err != nil || got != backendToken {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, backendToken)
		}
	}
	for _, tc := range []struct {
		name        string
		tk          *tokens
		tenant, via string
		token       string
	}{
		{"another tenant", tk, "green", listVolumes, sealed},
		{"another listing", tk, "blue", listSnapshots, sealed},
		{"ListVolumes' token in ControllerListVolumeHealth", tk, "blue", listVolumeHealth, sealed},
		{"another key (rotated)", mustTokens(t, nil), "blue", listVolumes, sealed},
		{"the backend's own token", tk, "blue", listVolumes, backendToken},
		{"not base64", tk, "blue", listVolumes, "nonsense!"},
		{"truncated", tk, "blue", listVolumes, sealed[:len(sealed)-2]},
	} {
		_, err := tc.tk.open(tc.tenant, tc.via, tc.token)
		wantCode(t, err, codes.Aborted, "was not issued to this caller for", "restart the listing with an empty starting_token")
		if strings.Contains(err.Error(), backendToken) {
			t.Errorf("%s: the refusal %q shows the backend's token", tc.name, err)
		}
	}
	// Every character of the token counts: the last one's unused low bits too.
	for i := range len(sealed) {
		for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") {
			if c == sealed[i] {
				continue
			}
			changed := sealed[:i] + string(c) + sealed[i+1:]
			if _, err := tk.open("blue", listVolumes, changed); err == nil {
				t.Fatalf("the token with character %d changed to %q was accepted", i, c)
			}
		}
	}
	// Every bit of the token is covered by the tag.
	for i := range raw {
		for bit := range 8 {
			changed := bytes.Clone(raw)
			changed[i] ^= 1 << bit
			if _, err := tk.open("blue", listVolumes, base64.RawURLEncoding.EncodeToString(changed)); err == nil {
				t.Fatalf("a token with bit %d of byte %d changed was accepted", bit, i)
			}
		}
	}
}

// TestTokensWithinCSILimits: the start and the end of a listing stay "", a backend token of
// MaxBackendToken bytes seals to at most 128 bytes, and a longer one is INTERNAL, naming the
// limit, and not shown.
func TestTokensWithinCSILimits(t *testing.T) {
	tk := mustTokens(t, nil)
	if s, err := tk.seal("blue", listVolumes, ""); s != "" || err != nil {
		t.Errorf("seal of the end of a listing: %q, %v; want \"\"", s, err)
	}
	if s, err := tk.open("blue", listVolumes, ""); s != "" || err != nil {
		t.Errorf("open of the start of a listing: %q, %v; want \"\"", s, err)
	}
	longest := strings.Repeat("t", MaxBackendToken)
	sealed, err := tk.seal("a-tenant-name-of-32-characters-x", listVolumes, longest)
	if err != nil || len(sealed) > MaxLength {
		t.Fatalf("a backend token of %d bytes sealed to %d bytes (%v); want at most %d", MaxBackendToken, len(sealed), err, MaxLength)
	}
	if MaxBackendToken != 68 {
		t.Errorf("MaxBackendToken = %d; the docs say 68", MaxBackendToken)
	}
	_, err = tk.seal("blue", listVolumes, longest+"u")
	wantCode(t, err, codes.Internal, "the backend's ListVolumes next_token is 69 bytes", "within 68 bytes")
	if strings.Contains(err.Error(), longest) {
		t.Errorf("the refusal %q shows the backend's token", err)
	}
}
