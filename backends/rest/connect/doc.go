// Package connect implements the wire protocol that csi-gateway's rest backend speaks by
// default: the unary JSON form of the Connect protocol (https://connectrpc.com/docs/protocol).
//
// Every CSI call is one HTTP request, "POST {base}/{package.Service}/{Method}" with the
// request message as protojson and Content-Type application/json, answered either with 200
// and the response message as protojson, or with an error status and a JSON body
// {"code": "not_found", "message": "..."}. docs/rest-protocol.md describes the protocol for
// an appliance vendor who implements it by hand.
//
// The package holds what both ends share, the table between gRPC codes, Connect code names
// and HTTP statuses (codes.go), and the server side (handler.go, with request parsing in
// request.go and error answers in errors.go): an http.Handler that serves any set of
// ordinary gRPC service implementations over this protocol, so the reference appliance can
// be reached over HTTP, and a Registrar that collects an implementation's services for it.
// The client side lives in the rest backend (backends/rest).
//
// The package refuses what the gateway does not need: binary protobuf bodies, GET requests,
// compression, streaming methods and error details are not served. It does no
// authentication, authorization or request logging of its own; callers wrap the handler.
package connect
