package proxy

import (
	"bytes"
	"context"
	"slices"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/protoread"
)

// guardListings keeps the paging of every List call sent to a backend (ListVolumes,
// ListSnapshots, ControllerListVolumeHealth, ListVolumeGroups) within the spec, on every
// path: the caller's own call and each page the tenancy layer asks for (see scopeTenants).
// It sits inside canonicalize, which turns its classes into codes like any backend's.
//
//   - A backend's refusal as invalid (INVALID_ARGUMENT, HTTP 400) of a call that carried a
//     starting_token becomes class aborted, ABORTED: the spec's code for an invalid
//     starting_token, whose recovery is to restart the listing with an empty one, which the
//     message says. Many drivers answer an unknown token with INVALID_ARGUMENT, which a CO
//     takes for final: its listing would stop instead of starting over.
//   - An answer whose next_token repeats a token of the listing ends it with class internal,
//     INTERNAL, naming the backend: following that token would list the same pages again,
//     forever. Not ABORTED: restarting from an empty token reaches the same loop again (a
//     backend's paging does not mend itself), and INTERNAL tells the CO the listing failed
//     for good rather than inviting it to page through everything once more.
//
// A listing, as far as the gateway can see it, is one call: the gateway keeps no state
// between a CO's calls, so a CO that pages by itself is protected against a next_token equal
// to the starting_token it sent, not against a loop of several pages (A → B → A); the
// tenancy layer, which pages the backend itself within one call, is protected against any
// token it already sent in that call (listingOf).
//
// Tokens are read from the raw messages (wireValue): nothing else of them is decoded, and
// nothing is allocated unless the listing keeps its tokens.
func guardListings() Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) error {
			if call.info == nil || call.info.paging == nil || call.Stream != nil {
				return next(ctx, call)
			}
			paging := call.info.paging
			token, _ := protoread.WireValue(call.Request, paging.starting)
			sent := listingOf(ctx)
			sent.add(token)
			if err := next(ctx, call); err != nil {
				if len(token) > 0 && backends.ClassOf(err) == backends.ClassInvalid {
					return refusedToken(call, err)
				}
				return err
			}
			nextToken, ok := protoread.WireValue(call.Response, paging.next)
			if !ok || len(nextToken) == 0 {
				return nil // the last page, or an answer validation refuses
			}
			switch {
			case bytes.Equal(nextToken, token):
				return repeatedToken(call, "the starting_token it was given")
			case sent.holds(nextToken):
				return repeatedToken(call, "a token the gateway already sent it in this listing")
			}
			return nil
		}
	}
}

// refusedToken is the answer to a backend's refusal (err, class invalid) of a List call that
// carried a starting_token.
func refusedToken(call *Call, err error) error {
	return &backends.Error{Class: backends.ClassAborted, Cause: err, Message: messageOf(err, backends.ClassInvalid) +
		"; csi-gateway: the backend refused the starting_token of this " + call.MethodName() +
		" call, which CSI answers with ABORTED: restart the listing with an empty starting_token"}
}

// repeatedToken ends a listing whose backend answered call with a next_token it was given
// before (what: which token).
func repeatedToken(call *Call, what string) error {
	return backends.Errorf(backends.ClassInternal,
		"backend %q answered %s with a next_token that repeats %s: following it would list the same entries forever, so the gateway ends the listing; fix the backend's paging",
		call.Backend, call.MethodName(), what)
}

// listing is the tokens the gateway sent a backend in the pages of one listing that it pages
// itself (the tenancy layer, within one caller's call): the pages are sent one after another,
// never at once. A nil *listing is a listing of one page, holding no token.
type listing struct {
	sent []string
}

type listingKey struct{}

// withListing returns ctx carrying a new listing, for the pages one call sends.
func withListing(ctx context.Context) context.Context {
	return context.WithValue(ctx, listingKey{}, &listing{})
}

// listingOf returns the listing ctx carries, nil when none.
func listingOf(ctx context.Context) *listing {
	l, _ := ctx.Value(listingKey{}).(*listing)
	return l
}

// add records a token sent in the listing.
func (l *listing) add(token []byte) {
	if l != nil && len(token) > 0 {
		l.sent = append(l.sent, string(token))
	}
}

// holds reports whether token was sent in the listing.
func (l *listing) holds(token []byte) bool {
	return l != nil && slices.ContainsFunc(l.sent, func(s string) bool { return s == string(token) })
}
