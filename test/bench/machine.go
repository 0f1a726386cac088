package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// machine describes where the figures were taken.
type machine struct {
	cpu       string // model name
	cores     int
	memory    string
	kernel    string
	goVersion string
	loadAvg   string  // the 1, 5 and 15 minute load averages when the bench started
	load1     float64 // the first of them
	date      time.Time
	versions  []string // of the gateway and the third-party relays
}

// loadedAbove is the 1-minute load average at the start above which the report says the
// machine was busy with other work.
const loadedAbove = 0.5

func describeMachine() machine {
	m := machine{
		cpu: "unknown", cores: runtime.NumCPU(), memory: "unknown", kernel: "unknown",
		goVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, date: time.Now().UTC(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.cpu = procField(string(b), "model name")
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if kb, err := strconv.ParseFloat(strings.TrimSuffix(procField(string(b), "MemTotal"), " kB"), 64); err == nil {
			m.memory = fmt.Sprintf("%.1f GiB", kb/(1<<20))
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.loadAvg = strings.Join(f[:3], " ")
			m.load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	return m
}

// procField returns the value of the first "key : value" line of a /proc file.
func procField(text, key string) string {
	for line := range strings.SplitSeq(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
