package h2grpc

import "google.golang.org/grpc"

// UserAgentCallOption sets the user-agent of one call (see CallUserAgent). grpc-go's own
// ClientConn ignores it: there, the user-agent belongs to the connection
// (grpc.WithUserAgent).
type UserAgentCallOption struct {
	grpc.EmptyCallOption
	header string // the user-agent header: the given one, then the client's token
}

// CallUserAgent returns a call option that sends ua, followed by the client's own token
// ("grpc-go-h2grpc/1"), as the call's user-agent in place of ClientConfig.UserAgent: a relay
// passes on its caller's this way. ua must be printable ASCII (else the call fails with
// Internal, as for metadata); its length counts in the request's header list, which the
// peer's SETTINGS_MAX_HEADER_LIST_SIZE bounds like every other header. The option is
// immutable: make it once per user-agent and use it for any number of calls.
func CallUserAgent(ua string) *UserAgentCallOption {
	return &UserAgentCallOption{header: joinUserAgent(ua)}
}

// joinUserAgent is the user-agent header for ua: ua, then the client's token.
func joinUserAgent(ua string) string {
	if ua == "" {
		return userAgentToken
	}
	return ua + " " + userAgentToken
}
