package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(i + 1)
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"none", nil, 0.5, 0},
		{"one", []time.Duration{ms(7)}, 0.99, ms(7)},
		{"p50 of 100", hundred, 0.50, ms(50)},
		{"p99 of 100", hundred, 0.99, ms(99)},
		{"p100 of 100", hundred, 1, ms(100)},
		{"p50 of 3", []time.Duration{ms(1), ms(2), ms(3)}, 0.5, ms(2)},
	} {
		if got := percentile(tc.sorted, tc.q); got != tc.want {
			t.Errorf("%s: percentile(%v) = %v, want %v", tc.name, tc.q, got, tc.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}
