package embedded

import (
	"testing"

	"google.golang.org/grpc/codes"
)

func TestPage(t *testing.T) {
	seq := func(n int64) int64 { return n }
	items := []int64{5, 1, 3, 2, 4}
	got, next, err := page("x", items, seq, "", 2)
	if err != nil || len(got) != 2 || got[0] != 1 || got[1] != 2 || next == "" {
		t.Fatalf("first page: %v %q %v", got, next, err)
	}
	// Item 2, where the token points, is deleted and 6 is added between pages.
	got, next, err = page("x", []int64{1, 3, 4, 5, 6}, seq, next, 0)
	if err != nil || len(got) != 4 || got[0] != 3 || got[3] != 6 || next != "" {
		t.Fatalf("rest: %v %q %v", got, next, err)
	}
	_, _, err = page("x", items, seq, "invalid-token", 0)
	wantCode(t, err, codes.Aborted, "empty starting_token")
	_, _, err = page("y", items, seq, encodeToken("x", 1), 0)
	wantCode(t, err, codes.Aborted)
	_, _, err = page("x", items, seq, "", -1)
	wantCode(t, err, codes.InvalidArgument, "max_entries")
}

func FuzzDecodeToken(f *testing.F) {
	f.Add("")
	f.Add(encodeToken("volumes", 42))
	f.Add("invalid-token")
	f.Fuzz(func(t *testing.T, token string) {
		after, err := decodeToken("volumes", token)
		if err == nil && token != "" && encodeToken("volumes", after) != token {
			t.Errorf("token %q accepted but does not round-trip", token)
		}
	})
}
