package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// mallocsMetric is the Go runtime's count of heap allocations, which the gateway's /metrics
// exports (proxy registers the Go collector).
const mallocsMetric = "csigw_go_memstats_mallocs_total"

// scrapeMallocs reads mallocsMetric from the gateway's admin listener at addr.
func scrapeMallocs(ctx context.Context, addr string) (float64, error) {
	return scrapeMetric(ctx, addr, mallocsMetric)
}

// scrapeMetric reads the unlabelled metric name from the gateway's admin listener at addr.
func scrapeMetric(ctx context.Context, addr, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("GET %s/metrics: no %s", addr, name)
}

// scrapeCost returns what one scrape allocates in the gateway: the smallest difference of
// several pairs of scrapes with no call in between. A window's count is taken between two
// scrapes, so it holds one scrape's allocations too, which this removes.
func scrapeCost(ctx context.Context, addr string) (float64, error) {
	best := -1.0
	for range 5 {
		a, err := scrapeMallocs(ctx, addr)
		if err != nil {
			return 0, err
		}
		b, err := scrapeMallocs(ctx, addr)
		if err != nil {
			return 0, err
		}
		if d := b - a; best < 0 || d < best {
			best = d
		}
	}
	return best, nil
}
