package backends

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
)

// TestCallInfoAnswered: what a backend notes of the driver's own answer is what the gateway
// reads back; a call with no CallInfo notes nothing and does not fail.
func TestCallInfoAnswered(t *testing.T) {
	ctx, ci := WithCallInfo(context.Background())
	if ci.AnsweredOtherwise() != nil {
		t.Fatal("a fresh CallInfo has an answer noted")
	}
	CallInfoFrom(ctx).NoteAnswered(codes.NotFound, "vol-1")
	if a := ci.AnsweredOtherwise(); a == nil || a.Code != codes.NotFound || a.Message != "vol-1" {
		t.Errorf("noted %+v, want NOT_FOUND vol-1", a)
	}
	var none *CallInfo
	none.NoteAnswered(codes.NotFound, "x")
	if none.AnsweredOtherwise() != nil {
		t.Error("a nil CallInfo returned an answer")
	}
}
