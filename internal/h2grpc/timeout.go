package h2grpc

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// maxTimeoutValue is the largest value the grpc-timeout header carries: at most 8 digits.
const maxTimeoutValue int64 = 100000000 - 1

// divUp divides d by r, rounding up, without the overflow of (d+r-1)/r.
func divUp(d, r time.Duration) int64 {
	if d%r > 0 {
		return int64(d/r + 1)
	}
	return int64(d / r)
}

// timeoutUnits are the units of the grpc-timeout header, finest first.
var timeoutUnits = [...]struct {
	d time.Duration
	c byte
}{{time.Nanosecond, 'n'}, {time.Microsecond, 'u'}, {time.Millisecond, 'm'}, {time.Second, 'S'}, {time.Minute, 'M'}, {time.Hour, 'H'}}

// encodeTimeout returns the grpc-timeout header value for d: the finest unit whose value fits
// in 8 digits, rounded up so the server never sees a shorter deadline than the client's. A
// non-positive d gives "0n".
func encodeTimeout(d time.Duration) string {
	if d <= 0 {
		return "0n"
	}
	last := len(timeoutUnits) - 1
	for _, u := range timeoutUnits[:last] {
		if v := divUp(d, u.d); v <= maxTimeoutValue {
			return strconv.FormatInt(v, 10) + string(u.c)
		}
	}
	return strconv.FormatInt(divUp(d, timeoutUnits[last].d), 10) + string(timeoutUnits[last].c)
}

// decodeTimeout parses a grpc-timeout header value ("1S", "250m", …). Values too large for a
// time.Duration are clamped to the largest one.
func decodeTimeout(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("timeout string is too short: %q", s)
	}
	if len(s) > 9 {
		return 0, fmt.Errorf("timeout string is too long: %q", s)
	}
	var unit time.Duration
	for _, u := range timeoutUnits {
		if s[len(s)-1] == u.c {
			unit = u.d
		}
	}
	if unit == 0 {
		return 0, fmt.Errorf("timeout unit is not recognized: %q", s)
	}
	v, err := strconv.ParseUint(s[:len(s)-1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("timeout value is not a number: %q", s)
	}
	if v > uint64(math.MaxInt64/int64(unit)) {
		return time.Duration(math.MaxInt64), nil
	}
	return unit * time.Duration(v), nil
}
