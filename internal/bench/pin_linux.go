package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// allCPUs lists the CPUs this process may run on.
func allCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var cpus []int
	for i := range runtime.NumCPU() * 4 {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus
}

// pinPhases pins this process to the last CPU it may run on, for the in-process phase, and
// returns that CPU: the server's in the HTTP phase.
func pinPhases() (int, error) {
	cpus := allCPUs()
	if len(cpus) < 2 {
		return 0, fmt.Errorf("pin: %d CPUs available, need 2", len(cpus))
	}
	last := cpus[len(cpus)-1]
	if last == 0 {
		return 0, fmt.Errorf("pin: the last CPU is CPU 0")
	}
	return last, pinSelf([]int{last})
}

// pinSelf sets the CPU affinity of every thread of this process to cpus. The Go runtime starts
// threads of its own; a thread started later inherits the affinity of the thread that started
// it, so after every present thread is pinned, so are the next ones (the list is read twice,
// for a thread started while the first pass ran).
func pinSelf(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("pin: %w", err)
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("pin thread %d to %v: %w", tid, cpus, err)
			}
		}
	}
	return nil
}
