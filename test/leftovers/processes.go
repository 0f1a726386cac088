package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// process is one /proc/PID entry.
type process struct {
	pid, ppid int
	start     string // start time in clock ticks since boot: a PID reused is another process
	cmdline   string
	cwd, exe  string
	env       []string
	netns     string // the link of /proc/PID/ns/net, e.g. net:[4026531840]
}

func (p process) key() string { return strconv.Itoa(p.pid) + " " + p.start }

// ours says why p is the run's ("env", "cwd DIR", "exe PATH"), or "" when it is not.
func (p process) ours(token, root string) string {
	if token != "" {
		for _, e := range p.env {
			if e == runEnv+"="+token {
				return "env " + runEnv
			}
		}
	}
	if under(p.cwd, root) {
		return "cwd " + p.cwd
	}
	if under(p.exe, root) {
		return "exe " + p.exe
	}
	return ""
}

func (p process) String() string {
	return fmt.Sprintf("process %d: %s", p.pid, p.cmdline)
}

func (h host) readProcesses() ([]process, error) {
	return readDir(h, "proc", func(name string) (process, bool) {
		pid, err := strconv.Atoi(name)
		if err != nil {
			return process{}, false
		}
		return h.readProcess(pid)
	})
}

// readProcess reads one process; false when it is gone (or its stat cannot be parsed).
func (h host) readProcess(pid int) (process, bool) {
	dir := h.path("proc/" + strconv.Itoa(pid))
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return process{}, false
	}
	ppid, start, comm, ok := parseStat(string(stat))
	if !ok {
		return process{}, false
	}
	p := process{pid: pid, ppid: ppid, start: start}
	if b, err := os.ReadFile(dir + "/cmdline"); err == nil && len(b) > 0 {
		p.cmdline = strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	} else {
		p.cmdline = "[" + comm + "]"
	}
	p.cwd, _ = os.Readlink(dir + "/cwd")
	p.exe, _ = os.Readlink(dir + "/exe")
	p.exe = strings.TrimSuffix(p.exe, " (deleted)")
	p.netns, _ = os.Readlink(dir + "/ns/net")
	if b, err := os.ReadFile(dir + "/environ"); err == nil {
		p.env = strings.Split(string(b), "\x00")
	}
	return p, true
}

// parseStat takes the parent PID, the start time and the command name from /proc/PID/stat:
// "pid (comm) state ppid … starttime …", where comm may hold spaces and parentheses.
func parseStat(stat string) (ppid int, start, comm string, ok bool) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return 0, "", "", false
	}
	fields := strings.Fields(stat[end+1:])
	// fields[0] is stat's third field (state); starttime is its 22nd.
	if len(fields) < 20 {
		return 0, "", "", false
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return 0, "", "", false
	}
	return ppid, fields[19], stat[open+1 : end], true
}
