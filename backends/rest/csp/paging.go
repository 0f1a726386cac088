package csp

import (
	"encoding/base64"
	"slices"
	"strings"

	"github.com/csi-gateway/csi-gateway/backends"
)

// tokenPrefix marks the gateway's pagination tokens: a CSP does not page, so the gateway
// pages what it lists, in ID order. A token names the last ID of the page before, so it stays
// valid when objects are added or deleted between pages.
const tokenPrefix = "csp1."

// page returns the entries of items (sorted here by id) after the token's position, at most
// max (0: all), and the token of the next page ("" at the end). ok is false for a token the
// gateway did not make (ABORTED, as CSI says for an invalid starting_token).
func page[T any](items []T, id func(T) string, token string, max int32) (out []T, next string, ok bool) {
	after := ""
	if token != "" {
		raw, found := strings.CutPrefix(token, tokenPrefix)
		b, err := base64.RawURLEncoding.DecodeString(raw)
		if !found || err != nil || len(b) == 0 {
			return nil, "", false
		}
		after = string(b)
	}
	slices.SortFunc(items, func(a, b T) int { return strings.Compare(id(a), id(b)) })
	start, _ := slices.BinarySearchFunc(items, after, func(item T, target string) int {
		if id(item) <= target {
			return -1
		}
		return 1
	})
	out = items[start:]
	if max > 0 && len(out) > int(max) {
		out = out[:max]
		next = tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(id(out[len(out)-1])))
	}
	return out, next, true
}

// pageRequest is what a List request says of its page.
type pageRequest interface {
	GetStartingToken() string
	GetMaxEntries() int32
}

// listPage answers a List request: the page of items (page) that req asks for, each
// rendered by entry, put in the answer by answer with the next page's token. A token the
// gateway did not make is ABORTED.
func listPage[T, E, R any](b *Backend, rpc string, items []T, id func(T) string, req pageRequest, entry func(T) (E, error), answer func(entries []E, next string) R) (R, error) {
	var none R
	items, next, ok := page(items, id, req.GetStartingToken(), req.GetMaxEntries())
	if !ok {
		return none, b.errorf(backends.ClassAborted, rpc, "starting_token %.40q is not one this gateway gave", req.GetStartingToken())
	}
	var out []E
	for _, it := range items {
		e, err := entry(it)
		if err != nil {
			return none, err
		}
		out = append(out, e)
	}
	return answer(out, next), nil
}
