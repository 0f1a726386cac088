package h2grpc

import (
	"math"
	"testing"
	"time"
)

func TestEncodeTimeout(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0n"},
		{0, "0n"},
		{time.Nanosecond, "1n"},
		{99999999 * time.Nanosecond, "99999999n"},
		{100 * time.Millisecond, "100000u"},
		{100*time.Millisecond + 1, "100001u"}, // rounded up, never shorter
		{3 * time.Second, "3000000u"},
		{200 * time.Second, "200000m"},
		{100000 * time.Second, "100000S"},
		{30 * 24 * time.Hour, "2592000S"},
		{10000 * 24 * time.Hour, "14400000M"},
		{time.Duration(math.MaxInt64), "2562048H"},
	}
	for _, c := range cases {
		if got := encodeTimeout(c.d); got != c.want {
			t.Errorf("encodeTimeout(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestDecodeTimeout(t *testing.T) {
	cases := []struct {
		s       string
		want    time.Duration
		wantErr bool
	}{
		{"1n", time.Nanosecond, false},
		{"5u", 5 * time.Microsecond, false},
		{"250m", 250 * time.Millisecond, false},
		{"3S", 3 * time.Second, false},
		{"2M", 2 * time.Minute, false},
		{"1H", time.Hour, false},
		{"99999999H", time.Duration(math.MaxInt64), false},
		{"", 0, true},
		{"1", 0, true},
		{"S", 0, true},
		{"123456789S", 0, true},
		{"10x", 0, true},
		{"-1S", 0, true},
		{"1.5S", 0, true},
	}
	for _, c := range cases {
		got, err := decodeTimeout(c.s)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("decodeTimeout(%q) = %v, %v; want %v, error %v", c.s, got, err, c.want, c.wantErr)
		}
	}
}

func FuzzTimeout(f *testing.F) {
	for _, s := range []string{"1n", "99999999H", "3S", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := decodeTimeout(s)
		if err != nil || d < 0 {
			return
		}
		back, err := decodeTimeout(encodeTimeout(d))
		if err != nil || back < d {
			t.Fatalf("%q: %v re-encoded to %v (%v)", s, d, back, err)
		}
	})
}
