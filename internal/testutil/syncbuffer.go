package testutil

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer guarded by a mutex, for output that goroutines under test write
// (a logger, a child process) while the test reads it. The zero value is ready to use; it is safe
// for concurrent use and must not be copied after first use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer; it never fails.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Take returns everything written since the last Take (or the start) and empties the buffer.
func (s *SyncBuffer) Take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.b.String()
	s.b.Reset()
	return out
}
