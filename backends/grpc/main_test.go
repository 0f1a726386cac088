package grpcbackend

import (
	"fmt"
	"os"
	"testing"
)

// framesUnderTest is the client the tests' backends send unary calls over: TestMain runs
// every test with grpc-go's client (the default) and again with the frame client.
var framesUnderTest = false

func TestMain(m *testing.M) {
	for _, frames := range []bool{false, true} {
		framesUnderTest = frames
		fmt.Printf("backends/grpc: unary calls over the frame client: %v\n", frames)
		if code := m.Run(); code != 0 {
			os.Exit(code)
		}
	}
	os.Exit(0)
}
