package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// snapshot is what the machine held before the run, by key, and how to tell the run's processes.
type snapshot struct {
	Run       string   `json:"run"`  // the value of CSIGWTEST_LEFTOVERS_RUN the run's processes carry
	Root      string   `json:"root"` // the checkout
	Processes []string `json:"processes"`
	NetNS     []string `json:"netns"` // every namespace a process was in
	Mounts    []string `json:"mounts"`
	Loops     []string `json:"loops"`
	NetnsName []string `json:"netnsNames"`
	Cgroups   []string `json:"cgroups"`
	Links     []string `json:"links"`
}

func takeSnapshot(h host, token, root string) (snapshot, error) {
	m, err := h.read()
	if err != nil {
		return snapshot{}, err
	}
	s := snapshot{Run: token, Root: root, Cgroups: m.cgroups}
	for _, p := range m.processes {
		s.Processes = append(s.Processes, p.key())
		s.NetNS = append(s.NetNS, p.netns)
	}
	for _, x := range m.mounts {
		s.Mounts = append(s.Mounts, x.key())
	}
	for _, x := range m.loops {
		s.Loops = append(s.Loops, x.key())
	}
	for _, x := range m.netnsName {
		s.NetnsName = append(s.NetnsName, x.name)
	}
	for _, x := range m.links {
		s.Links = append(s.Links, x.key())
	}
	return s, nil
}

func (s snapshot) write(file string) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o600)
}

func readSnapshot(file string) (snapshot, error) {
	var s snapshot
	b, err := os.ReadFile(file)
	if err != nil {
		return s, fmt.Errorf("%v (take one with `leftovers snapshot FILE` before the run)", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %v", file, err)
	}
	return s, nil
}
