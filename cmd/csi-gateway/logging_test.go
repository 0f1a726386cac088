package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLoggerWritesDurationsAsStrings: both formats write a duration as "30s", in a group too,
// where slog's JSON handler would write nanoseconds.
func TestLoggerWritesDurationsAsStrings(t *testing.T) {
	for format, want := range map[string]string{
		"json": `"msg":"stopping","grace":"30s","retry":{"after":"1.5s"},"n":3}`,
		"text": `msg=stopping grace=30s retry.after=1.5s n=3`,
	} {
		var buf bytes.Buffer
		newLogger(&buf, slog.LevelInfo, format).Info("stopping", "grace", 30*time.Second,
			slog.Group("retry", "after", 1500*time.Millisecond), "n", 3)
		if !strings.Contains(buf.String(), want) {
			t.Errorf("%s: logged %s, want it to contain %s", format, buf.String(), want)
		}
	}
}
