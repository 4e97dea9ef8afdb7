package harness

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat times.
var clockTicks = func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && v > 0 {
			return v
		}
	}
	return 100
}()

// CPUSeconds is the user+system CPU time a process has used so far, from
// /proc/PID/stat.
func CPUSeconds(pid int) (float64, error) {
	user, system, err := CPUTimes(pid)
	return user + system, err
}

// CPUTimes is the user and the system CPU time a process has used so far,
// in seconds, from /proc/PID/stat.
func CPUTimes(pid int) (user, system float64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces: fields count from the
	// last ')'. utime and stime are fields 14 and 15.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, s)
	}
	// f[0] is field 3 (state): utime is f[11], stime f[12].
	u, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, s)
	}
	return u / clockTicks, st / clockTicks, nil
}

// StatusKiB reads a "Vm..." field of /proc/PID/status (VmRSS, VmHWM), in
// KiB.
func StatusKiB(pid int, field string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			return strconv.ParseFloat(f[0], 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// MachineBusySeconds is the CPU time all cores together have spent busy
// (not idle, not waiting for I/O) since boot, from /proc/stat's first
// line: what every process on the machine used, the benchmark's own
// included.
func MachineBusySeconds() (float64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return busySeconds(string(data))
}

// busySeconds parses /proc/stat's aggregate "cpu" line: user nice system
// idle iowait irq softirq steal (guest times are already in user and
// nice), in clock ticks.
func busySeconds(stat string) (float64, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("unexpected /proc/stat first line: %q", line)
	}
	var busy float64
	for i, v := range f[1:9] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc/stat first line: %q", line)
		}
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		busy += n
	}
	return busy / clockTicks, nil
}
