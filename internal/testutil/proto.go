package testutil

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// MustMarshal returns the wire bytes of m, failing the test when m cannot be marshaled.
func MustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
