package initiators

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
)

// fileExt is the extension of the registry's files.
const fileExt = ".json"

// maxFileName bounds the registry's file names, below NAME_MAX (255 bytes) with room for
// file systems that keep less (eCryptfs: 143) and for Kubernetes ConfigMap keys (253).
const maxFileName = 128

// hashedPrefix starts the name of a node whose escaped ID is too long: it never starts an
// escaped ID, since an escape is _ and two hex digits.
const hashedPrefix = "__"

// FileName is the name of a node's file in a registry directory: its ID escaped so that
// any ID, whatever its bytes, makes a plain file name of that directory (no separator, no
// . or .., no hidden file) and two IDs never make the same name. ASCII letters, digits, -
// and . (but a leading .) stay as they are; every other byte becomes _ and two upper-case
// hex digits: "node-1.example" → "node-1.example.json", "Node 1" → "Node_201.json",
// "node/../x" → "node_2F.._2Fx.json". The names are also valid ConfigMap keys.
//
// An ID whose escaped form would be longer than 128 bytes gets __ and the SHA-256 of the
// ID instead; the ID is in the file, which Lookup and List check. ParseFileName reverses
// the escaping.
func FileName(nodeID string) (string, error) {
	if nodeID == "" {
		return "", errors.New("empty node ID")
	}
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(nodeID); i++ {
		c := nodeID[i]
		if keep(c) && (c != '.' || i > 0) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
	if b.Len()+len(fileExt) > maxFileName {
		sum := sha256.Sum256([]byte(nodeID))
		return hashedPrefix + hex.EncodeToString(sum[:]) + fileExt, nil
	}
	return b.String() + fileExt, nil
}

// keep reports whether FileName keeps c as it is.
func keep(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.'
}

// ParseFileName returns the node ID whose file is name, the reverse of FileName. It
// reports false for a name FileName does not make, and for the hashed name of a long ID,
// whose ID is only in the file.
func ParseFileName(name string) (string, bool) {
	s, ok := strings.CutSuffix(name, fileExt)
	if !ok || s == "" || strings.HasPrefix(s, hashedPrefix) {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' {
			if !keep(c) || c == '.' && i == 0 {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := hex.DecodeString(s[i+1 : i+3])
		if err != nil {
			return "", false
		}
		b.WriteByte(v[0])
		i += 2
	}
	id := b.String()
	if canonical, err := FileName(id); err != nil || canonical != name {
		return "", false // not FileName's form for its ID (an escape of a kept byte, say)
	}
	return id, true
}
