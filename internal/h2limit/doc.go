// Package h2limit holds the per-connection HTTP/2 limits that neither x/net's Framer nor
// grpc-go's server enforce, so that both of the gateway's transports hold a client to the
// same rules:
//
//   - ResetBudget: how fast a client may reset its streams (RST_STREAM) on one connection,
//     against the rapid-reset attack (CVE-2023-44487). internal/h2grpc spends it in its
//     reader; Conn spends it for grpc-go's server.
//   - Conn: a net.Conn wrapper for a grpc-go server's connection, installed after the
//     handshake, that reads the 9-byte headers of the frames passing through it (and the few
//     bytes of SETTINGS and WINDOW_UPDATE payloads) to spend the ResetBudget and to notice an
//     answer that a client's closed flow-control window has held back for longer than the
//     write timeout. grpc-go gives a handler no way to reset its stream, so Conn ends the
//     whole connection then (GOAWAY when it can be written between two of grpc-go's frames).
//
// What it refuses to do: decode header blocks, hold payloads, or write anything but that last
// GOAWAY; it never delays a byte (it reads what passes, and keeps a few words per open stream).
package h2limit
