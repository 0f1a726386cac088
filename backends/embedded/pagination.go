package embedded

import (
	"cmp"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// page returns up to maxEntries items (all when 0) that come after the position encoded in
// token, in creation order, and the token for the next page ("" on the last page).
//
// A token names a position in the creation order (a sequence number), not an index, so it
// stays valid when the item it was taken from is deleted, and items created between two
// pages show up on a later page. kind ties a token to one listing: a ListVolumes token is
// refused by ListSnapshots. An unknown token is ABORTED, as the spec requires.
func page[T any](kind string, items []T, seq func(T) int64, token string, maxEntries int32) ([]T, string, error) {
	if maxEntries < 0 {
		return nil, "", status.Errorf(codes.InvalidArgument, "max_entries must not be negative, got %d", maxEntries)
	}
	after, err := decodeToken(kind, token)
	if err != nil {
		return nil, "", err
	}
	slices.SortFunc(items, func(a, b T) int { return cmp.Compare(seq(a), seq(b)) })
	start, _ := slices.BinarySearchFunc(items, after+1, func(it T, target int64) int { return cmp.Compare(seq(it), target) })
	items = items[start:]
	if maxEntries == 0 || len(items) <= int(maxEntries) {
		return items, "", nil
	}
	items = items[:maxEntries]
	return items, encodeToken(kind, seq(items[len(items)-1])), nil
}

func encodeToken(kind string, after int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + strconv.FormatInt(after, 10)))
}

func decodeToken(kind, token string) (int64, error) {
	if token == "" {
		return 0, nil
	}
	bad := status.Errorf(codes.Aborted, "starting_token %.64q was not issued by this %s listing; restart the listing with an empty starting_token", token, kind)
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, bad
	}
	k, n, ok := strings.Cut(string(raw), ":")
	if !ok || k != kind {
		return 0, bad
	}
	after, err := strconv.ParseInt(n, 10, 64)
	// Only the exact text encodeToken writes is accepted: base64 with stray low bits or a
	// number with a sign or leading zeros would otherwise name the same position.
	if err != nil || after < 0 || encodeToken(kind, after) != token {
		return 0, bad
	}
	return after, nil
}
