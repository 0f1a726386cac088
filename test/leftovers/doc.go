// Command leftovers is the check behind "the tests leave no process, mount, loop device, network
// namespace, cgroup or bridge behind": `make test` and `make e2e` run
//
//	leftovers snapshot FILE   before the tests: what the machine holds now
//	leftovers check FILE      after them: what the run added that is still there
//
// check prints one line per leftover (a process's PID and command line, a mount point, a loop
// device and its backing file, a network namespace, a cgroup, a network link) and exits 1 if
// there is any, after polling for up to -grace (10 s) so that processes being reaped and lazy
// unmounts have time to go.
//
// Processes are attributed, not diffed machine-wide, because other jobs (another checkout's
// tests, a kubelet) may run on the same machine: a process that did not exist at the snapshot
// (PID and start time) is the run's when its environment carries the run's token
// (CSIGWTEST_LEFTOVERS_RUN, which the Makefile exports to everything it starts and the snapshot
// records; exec.Cmd passes it on), or when its working directory or executable is under the
// checkout (go test runs each test binary in its package's directory, and children inherit it;
// so one run per checkout at a time).
// The checker itself and its ancestors (the shell, make) are never counted. A name (etcd,
// kubelet, csi-sanity, …) or a shared directory (/tmp/go-build*, the e2e cache) is not enough:
// another checkout's run starts the same programs from the same places.
//
// Mounts, loop devices, links and /run/netns names carry no owner: they are diffed
// machine-wide. A cgroup or a named network namespace (and its nsfs mount) that was added but
// holds only processes that are not the run's is someone else's and is not reported; a network
// namespace held by a leftover process is named with it. -ignore REGEXP drops the lines it matches, for what
// another job on the same machine adds (CI runs on a machine of its own and needs none).
//
// It reads /proc, /sys and /run only; it changes nothing.
package main
