package h2limit

import "encoding/binary"

// HTTP/2 frame types and flags the scanner's users look at (RFC 9113 §6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8

	flagEndStream = 0x1
	flagAck       = 0x1

	settingInitialWindowSize = 0x4
)

// frameHeader is the 9-byte header every HTTP/2 frame starts with.
type frameHeader struct {
	length uint32
	typ    uint8
	flags  uint8
	stream uint32
}

// frameScanner follows the frames of one direction of a connection from the bytes that pass,
// in whatever pieces they pass: it finds each frame's header and skips its payload, except
// the pieces its header callback asks for (a SETTINGS entry, a WINDOW_UPDATE increment). It
// costs a few operations per frame, none per payload byte. Not safe for concurrent use.
type frameScanner struct {
	// onHeader learns each frame's header and returns the size of the payload pieces to
	// collect for onPayload (6 for SETTINGS entries, 4 for a WINDOW_UPDATE), or 0.
	onHeader  func(frameHeader) int
	onPayload func(h frameHeader, piece []byte)

	left  int // payload bytes (or, first, client preface bytes) still to pass
	hdr   [9]byte
	nhdr  int
	cur   frameHeader
	piece int // size of the pieces collected from cur's payload; 0: none
	pay   [6]byte
	npay  int
}

// skipPreface makes the scanner pass the 24-byte client preface first (the server's read
// side).
func (s *frameScanner) skipPreface() { s.left = 24 }

// atBoundary reports whether the bytes passed so far end between two frames.
func (s *frameScanner) atBoundary() bool { return s.left == 0 && s.nhdr == 0 }

// scan passes p.
func (s *frameScanner) scan(p []byte) {
	for len(p) > 0 {
		if s.left > 0 {
			if s.piece == 0 {
				n := min(len(p), s.left)
				s.left -= n
				p = p[n:]
				continue
			}
			n := min(len(p), s.piece-s.npay)
			copy(s.pay[s.npay:], p[:n])
			s.npay += n
			s.left -= n
			p = p[n:]
			if s.npay == s.piece {
				s.onPayload(s.cur, s.pay[:s.piece])
				s.npay = 0
				if s.left < s.piece {
					s.piece = 0 // a malformed tail; the server rejects it
				}
			}
			continue
		}
		n := copy(s.hdr[s.nhdr:], p)
		s.nhdr += n
		p = p[n:]
		if s.nhdr < len(s.hdr) {
			return
		}
		s.nhdr = 0
		s.cur = frameHeader{
			length: uint32(s.hdr[0])<<16 | uint32(s.hdr[1])<<8 | uint32(s.hdr[2]),
			typ:    s.hdr[3],
			flags:  s.hdr[4],
			stream: binary.BigEndian.Uint32(s.hdr[5:]) & 0x7fffffff,
		}
		s.left = int(s.cur.length)
		s.piece = s.onHeader(s.cur)
		if s.left < s.piece {
			s.piece = 0
		}
	}
}
