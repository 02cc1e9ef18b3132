//go:build !linux

package bench

import "errors"

func allCPUs() []int { return nil }

func pinPhases() (int, error) { return 0, errors.New("pin: CPU affinity is set on Linux only") }

func pinSelf([]int) error { return nil }
